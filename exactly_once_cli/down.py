"""`down`: stop the local stack that `up` (or `run --keep`) serves, and check nothing is left."""

from __future__ import annotations

from typing import Annotated

import typer

from exactly_once_cli.common import fail, stderr, stdout
from exactly_once_cli.up import state_paths
from exactly_once_ops.local_state import AlreadyUp, default_paths
from local_aws.launcher import stop_background


def down_cmd(
    timeout: Annotated[
        float, typer.Option(min=1, help="Seconds to wait before killing what did not stop.")
    ] = 60,
) -> None:
    """Stop the local stack (SIGTERM, as Ctrl-C would) and confirm no process of it is left.

    Exits 1 if something had to be killed. Nothing up is not an error.
    """
    if default_paths() is None:  # no state folder here (no cdk.json at or above): none is up
        stdout().print(
            "no local stack is up here (`eonce down` stops the one started from this folder, "
            "or from the CDK app's folder it is in)"
        )
        return
    try:
        stopped = stop_background(state_paths(), timeout_s=timeout)
    except AlreadyUp as exc:
        fail(str(exc))
    if stopped.pid is None:
        if stopped.stale is not None:
            stderr().print(
                f"[dim]removed the state of a stack that died (pid {stopped.stale.pid})[/]"
            )
        for server in stopped.orphans:
            stderr().print(
                f"[dim]stopped the PostgreSQL server a dead stack left (pid {server.pid})[/]"
            )
        stdout().print("no local stack is up")
        return
    if stopped.left:
        fail(f"still running after kill: pids {' '.join(str(p.pid) for p in stopped.left)}")
    if stopped.forced:
        fail(
            f"stopped pid {stopped.pid}, but had to kill "
            f"{' '.join(str(p.pid) for p in stopped.forced)}; nothing is left running now"
        )
    stdout().print(
        f"[green]✓[/] stopped the local stack (pid {stopped.pid} and its "
        f"{len(stopped.children)} child process(es)); nothing left running"
    )
