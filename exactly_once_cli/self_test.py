"""`--lock-off` for the commands that start function processes (`run`, `chaos`; `up` has no
such flag): the harness's self-test switch (local_aws.lock_off), set only when asked for."""

from __future__ import annotations

import typer

from local_aws import lock_off


def apply_lock_off(requested: bool) -> None:
    """Set the switch for the processes this command starts, or refuse one it inherited."""
    try:
        lock_off.decide(requested)
    except lock_off.InheritedLockOff as exc:
        raise typer.BadParameter(str(exc), param_hint="--lock-off") from None
