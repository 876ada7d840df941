"""`OnceBlock`: how a `with once(...) as claim:` block ends, written as the key's outcome.

Its own module because the exit rules are a job of their own, and the subtle one: a return
records COMPLETED, a raise records FAILED (retryable unless a PermanentError) and propagates,
and nothing is written when it must not be: after the block recorded an outcome or tried
`succeed`, after `LeaseLost` (a newer holder owns the key), for a clone's inherited lock, or
for a durable execution's suspension (parked, not failed; made FAILED only when its
transaction holds writes that the replay could never make again).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Literal

from exactly_once import durable, observability
from exactly_once.claims import Claim
from exactly_once.effects import LeaseLost
from exactly_once.errors import CommitFailed, PermanentError
from exactly_once.held_lock import OnceLock
from exactly_once.stores.records import ErrorInfo


class OnceBlock:
    """`with once(...) as claim:` — `begin` on entry; on exit, the outcome of an acquired
    claim: a raise records FAILED (retryable unless a PermanentError) and propagates, a
    return records COMPLETED with None unless the block recorded an outcome itself. A claim
    that was not acquired writes nothing."""

    def __init__(self, start: Callable[[], Claim]) -> None:
        self._start = start
        self.claim: Claim | None = None

    def __enter__(self) -> Claim:
        self.claim = self._start()
        return self.claim

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        claim = self.claim
        if claim is None or not claim.acquired:
            return False
        try:
            return self._record(claim, claim.lock, exc)
        finally:
            claim.lock.abandon()

    @staticmethod
    def _record(claim: Claim, lock: OnceLock, exc: BaseException | None) -> Literal[False]:
        if lock.outcome is not None or lock.succeed_tried:
            return False  # recorded by the block, or completion tried: never failed after it
        if exc is None:
            try:
                lock.succeed(None)  # a LeaseLost here tells a zombie it was superseded
            except CommitFailed as failed:  # the block's writes rolled back: retry the key
                lock.fail(failed, retryable=True)
                raise
            return False
        if isinstance(exc, LeaseLost):
            return False  # a newer holder owns the key: nothing of ours may be written
        if lock.store_lock.inherited:
            return False  # a clone's copy of its parent's lock: the parent's key, not ours
        if durable.is_suspension(exc):
            if lock.holds_uncommitted_writes():
                _fail_suspended(claim, lock)
            return False  # parked, not failed: the execution's replay resumes this lock
        try:
            lock.fail(exc, retryable=not isinstance(exc, PermanentError))
        except Exception as failed:  # the block's own error is what the caller must see
            observability.logger().warning(
                "could not record the failure; the key is retried once the lease ends",
                extra={"key": claim.key, "fence": lock.fence, "error": repr(failed)},
            )
        return False


def _fail_suspended(claim: Claim, lock: OnceLock) -> None:
    """A suspension reached a block whose transaction holds writes. They roll back with the
    invocation, and a replay may never make them again: it skips a checkpointed step that wrote
    them, or finds a lock that was not its own. Rather than let the key end COMPLETED (or be
    taken over) without them, it is made FAILED for a person, loudly."""
    message = durable.SUSPENDED_WITH_WRITES.format(key=claim.key, fence=lock.fence)
    observability.logger().error(message, extra={"key": claim.key, "fence": lock.fence})
    try:
        lock.fail(ErrorInfo("SuspendedWithUncommittedWrites", message, retryable=False))
    except Exception as failed:  # the suspension is what the SDK must see
        observability.logger().warning(
            "could not record the failure; the key is retried once the lease ends",
            extra={"key": claim.key, "fence": lock.fence, "error": repr(failed)},
        )
