"""A self-test of the harness, not a feature of the layer: run the functions with the idempotency
lock turned off, to prove that the verdicts of `make run` and `make chaos` can fail.

With `EONCE_LOCK_OFF=1` in a worker's environment, `install_if_enabled` (called by every worker
process before it loads the function: the poller's, the SNS delivery's, the API gateway's and
the chaos harness's) patches both stores' `acquire` and `acquire_many` so that every delivery
acquires a record of its own (the key gets a unique suffix). Nothing is ever a duplicate, no
lease is ever held against anyone, and each delivery runs the business function: the execution
log then shows a second execution for every key that was delivered twice, and the run must
fail.

The business function still sees its real key (the context carries the key it was given, not
the record's id), so its log entries are counted under the business key, as they would be.
The layer itself has no such switch: this lives in the harness, for its own tests. Only
`--lock-off` sets it (`decide`): a command that inherited it from the shell refuses to start,
so a plain `up`, `run` or `chaos` never runs with the lock off.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import replace
from typing import Any

LOCK_OFF_ENV = "EONCE_LOCK_OFF"
SUFFIX = "#lock-off-"


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """True when the environment asks for the lock to be off ("1")."""
    return (os.environ if environ is None else environ).get(LOCK_OFF_ENV, "") == "1"


class InheritedLockOff(Exception):
    """EONCE_LOCK_OFF=1 came from the shell, not from `--lock-off`."""


def decide(requested: bool, environ: MutableMapping[str, str] | None = None) -> None:
    """Set the switch for the function processes a command is about to start: on when the
    command was asked to (`--lock-off`); otherwise an EONCE_LOCK_OFF=1 the command inherited is
    refused (InheritedLockOff), since its processes would inherit it too and run a plain `up`,
    `run` or `chaos` with the lock off, unannounced."""
    env = os.environ if environ is None else environ
    if requested:
        env[LOCK_OFF_ENV] = "1"
    elif enabled(env):
        raise InheritedLockOff(
            f"{LOCK_OFF_ENV}=1 is set in this environment: every function process would run "
            "with the idempotency lock off. Unset it, or pass --lock-off for the self-test."
        )


def _fresh_record(acquire: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(acquire)
    def every_delivery_its_own(self: Any, scope: str, key: str, **kwargs: Any) -> Any:
        return acquire(self, scope, f"{key}{SUFFIX}{uuid.uuid4().hex}", **kwargs)

    every_delivery_its_own.lock_off = True  # type: ignore[attr-defined]
    return every_delivery_its_own


def _fresh_records(acquire_many: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(acquire_many)
    def every_delivery_its_own(self: Any, requests: Any) -> Any:
        return acquire_many(
            self, [replace(r, key=f"{r.key}{SUFFIX}{uuid.uuid4().hex}") for r in requests]
        )

    every_delivery_its_own.lock_off = True  # type: ignore[attr-defined]
    return every_delivery_its_own


def install() -> None:
    """Patch `acquire` and the batch's `acquire_many` on both stores in this process
    (idempotent)."""
    from exactly_once.stores.dynamodb.store import IdempotencyStore
    from exactly_once.stores.postgres.store import PostgresStore

    for store in (IdempotencyStore, PostgresStore):
        if not getattr(store.acquire, "lock_off", False):
            store.acquire = _fresh_record(store.acquire)  # type: ignore[method-assign]
        if not getattr(store.acquire_many, "lock_off", False):
            store.acquire_many = _fresh_records(store.acquire_many)  # type: ignore[method-assign]


def install_if_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """`install` when EONCE_LOCK_OFF=1; True if it did."""
    if not enabled(environ):
        return False
    install()
    return True
