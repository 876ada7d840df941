"""What every entry point's context has: the lock one execution holds on its key.

Fenced effects (effects.py) and the ledger need only the lock, the key and where the work came
from, so they take a `LockedContext`; each entry point's room adds its own context with its
own fields (`sqs/context.py`, `sns/context.py`, `http/context.py`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from exactly_once import heartbeat
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import Lock

if TYPE_CHECKING:
    from exactly_once.steps.runner import StepRun
    from exactly_once.steps.step import Step

T = TypeVar("T")


class LockedContext(ABC):
    """The lock one execution holds on a record: its key, fence and attempt."""

    key: str
    fence: int  # strictly increases per key across holders: pass it downstream as a fence
    attempt: int
    _store: Store | None
    _lock: Lock | None
    _step_run: StepRun | None = None  # the holder's steps, from its first `step`

    def step(self, name: str, fn: Callable[[Step], T]) -> T:
        """Run `fn(step)` once for this key and keep its result as a recovery point: the key's
        next holder (a retry, a takeover after a crash, a durable replay, the completer) gets
        the result back without running `fn` again. Steps are ordered: call them in the same
        order every time, each with a name of its own. Its writes commit with the point
        (`step.transaction` on PostgreSQL, `step.write` on DynamoDB); a call to the outside
        world passes `step.idempotency_key`. See docs/steps.md."""
        from exactly_once.steps.runner import run_step

        return run_step(self, name, fn)

    @property
    @abstractmethod
    def origin_id(self) -> str:
        """What started the work (a message id, a request id): written beside its effects."""

    @property
    def scope(self) -> str:
        """The entry point's key space (the record id is "{scope}#{key}")."""
        if self._lock is None:
            return ""
        if self._lock.scope:
            return self._lock.scope
        return self._lock.record_id[: -len(self.key) - 1] if self.key else self._lock.record_id

    @property
    def transaction(self) -> Any:
        """The open `psycopg.Connection` whose transaction commits with this key's COMPLETED
        record (PostgreSQL store only): business writes made on it happen exactly when the
        work is recorded done, and roll back when this holder lost its lease. Keep slow calls
        to other systems out of it (docs/postgres.md: a payment API called inside it cannot be
        rolled back with it). Inside a step it is the step's own transaction (steps/), which
        commits with the step's recovery point instead."""
        step = running_step(self)
        if step is not None:
            return step.transaction  # inside a step, its writes commit with the step
        if self._store is None or self._lock is None:
            raise RuntimeError("this context holds no lock")
        return self._store.transaction(self._lock)

    def extend_lease(self, lease_ms: int) -> bool:
        """Renew the lock for work that outlives its lease; False means it was lost."""
        if self._store is None or self._lock is None:
            return False
        result = self._store.extend(self._lock, lease_ms)
        if result.ok and result.lock is not None:
            self._lock = result.lock
            heartbeat.reach(result.lock, lease_ms / 1000)  # renewals honour it (heartbeat.py)
        return result.ok


def running_step(ctx: LockedContext) -> Step | None:
    """The step whose function runs now in this holder, if any."""
    run = ctx._step_run
    return None if run is None else run.running
