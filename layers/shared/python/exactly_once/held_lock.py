"""`OnceLock`: what the holder of a key holds, and the only way an outcome is written.

Its own module because the holder's rules are a job of their own, apart from how a key is
claimed (claims.py) or how a `with once(...)` block ends (once_block.py): every write is
fenced on the lock's token and retried while the invocation has time, `succeed` once tried is
never followed by `fail` (the work is done), a refused write raises `LeaseLost`, a PostgreSQL
lock lends the transaction that commits with `succeed`, and a heartbeat keeps a short lease.
The lock metrics (`STARTED`, `FINISHED`) and the defaults of `fail` live here with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from exactly_once import durable, heartbeat, observability
from exactly_once.completion import COMPLETE_ATTEMPTS, write_durably
from exactly_once.context import LockedContext, running_step
from exactly_once.effects import LeaseLost
from exactly_once.errors import CommitFailed, CommitUnknown, ConfigurationError, PermanentError
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import ErrorInfo, Finish, Lock, WriteResult
from exactly_once.stores.schema import Status

STARTED = "Started"  # a lock was taken: work began
FINISHED = "Finished"  # its outcome (COMPLETED or FAILED) was written
AFTER_BATCH = COMPLETE_ATTEMPTS - 1  # a gathered outcome's own tries once its batch's failed
"""Lock metrics, emitted at once per event: `Started - Finished` over a window is work that
began and has no recorded outcome (a crash, a timeout, a zombie). The stack alarms on it."""


class OnceLock(LockedContext):
    """The lock `begin` took on one key, until its outcome is recorded.

    It is a `LockedContext`, so fenced effects (`effects.put_once`, `ledger.record_effect`)
    take it as they take a queue record's context; they record `owner` as their origin.
    Every write is fenced on the lock's token and retried (bounded, like the queue path's
    completion), and a refused one raises `LeaseLost`: the key has a newer holder.
    """

    def __init__(
        self,
        store: Store,
        lock: Lock,
        key: str,
        owner: str,
        lambda_context: Any = None,
        *,
        reserve_ms: float = 0.0,
        durable_execution: str | None = None,
    ) -> None:
        self.key = key
        self.fence = lock.fence  # strictly increases per key: pass it downstream as a fence
        self.attempt = lock.attempt
        self.owner = owner
        self.lambda_context = lambda_context
        # Retries of a write stop while more than this is left of the invocation: a batch
        # keeps time to answer SQS (see completion.write_durably).
        self.reserve_ms = reserve_ms
        # The durable execution whose replays resume this lock (its ARN): no transaction then.
        self.durable_execution = durable_execution
        self._store: Store | None = store
        self._lock: Lock | None = lock
        self._outcome: Status | None = None  # COMPLETED or FAILED, once written
        # `succeed` was tried: the work is done, so the lock must never be failed after it,
        # even when the completion write never got through (a retry would run it again).
        self._succeeding = False
        self._lent: Any = None  # the transaction `transaction` lent, until an outcome ends it
        self._beat: heartbeat.Beat | None = None  # renews a short lease (heartbeat.py)
        self._gathered = False  # its completion waits in a batch's write (`gathered`)
        # time.monotonic() until which the key stays this holder's, by its lease or its beat
        # (claims.py sets it; None: not known). A batch gathers a completion only if it lasts.
        self.held_until: float | None = None

    def __repr__(self) -> str:
        return (
            f"OnceLock(key={self.key!r}, fence={self.fence}, attempt={self.attempt}, "
            f"owner={self.owner!r}, outcome={self._outcome})"
        )

    @property
    def origin_id(self) -> str:
        return self.owner

    @property
    def outcome(self) -> Status | None:
        """COMPLETED or FAILED once this holder recorded it; None while it holds the key."""
        return self._outcome

    @property
    def succeed_tried(self) -> bool:
        """`succeed` was called, whether or not its write got through: never fail after it."""
        return self._succeeding

    @property
    def lease_ends_at(self) -> float:
        """Epoch seconds after which another caller may take the key over."""
        return self._held().lease_expires_at_ms / 1000

    @property
    def store_lock(self) -> Lock:
        """The store's lock (its token fences every write), for an entry point's context."""
        return self._held()

    def extend(self, seconds: float) -> float:
        """Hold the key `seconds` from now, for work running longer than its lease; returns
        the new lease end. `expected_by` stays: work that needs more time is late."""
        lock = self._held().own()  # a clone's copy is refused before any retry
        store = self._writer()
        written = self._write(lambda: store.extend(lock, positive_ms(seconds, "seconds")), "extend")
        if written.lock is not None:
            self._lock = written.lock
            if self._beat is not None:  # renewed from now on up to `seconds` from now
                self._beat.reach(written.lock, seconds)
        return self.lease_ends_at

    def succeed(self, result: Any = None) -> None:
        """Record COMPLETED with `result` (stored with its types, see codec.py).

        If it raises anything but `LeaseLost` (the store stayed unreachable through the
        retries), the record stays IN_PROGRESS until its lease ends; calling it again is safe.
        """
        lock = self._unfinished()
        store = self._writer()
        self._succeeding = True
        self._lent = None  # the completion commits it, or rolls it back
        try:
            self._write(lambda: store.complete(lock, result), "succeed")
        except CommitFailed:
            # The work's writes rolled back with the completion: nothing happened, so failing
            # the key is safe again (the entry points do; CommitUnknown keeps it as it is).
            self._succeeding = False
            raise
        self._outcome = Status.COMPLETED
        self._end_beat()
        observability.count_lock_event(FINISHED, self.scope)

    def gathered(self, result: Any = None) -> Finish | None:
        """`succeed`'s write, handed to a batch that sends several holders' outcomes in one
        round trip (the store's `finish_many`), then `settle`d with its answer. None when this
        lock must commit on its own: a lent transaction commits with its own completion.
        From here on the work counts as done, as after `succeed`: never failed after it."""
        lock = self._unfinished()
        if self._lent is not None:
            return None
        self._succeeding = True
        self._gathered = True  # its beat renews the lease until the batch's write answers
        return Finish(lock, result)

    def released(self, reason: str) -> Finish:
        """A retryable failure for a batch's `finish_many`: the holder never ran the work (a
        FIFO group stopped before it, the invocation ran short), so the key is free at once
        rather than left until the lease ends."""
        lock = self._unfinished()
        self._lent = None
        return Finish(lock, error=ErrorInfo("Released", reason, retryable=True))

    def settle(self, finish: Finish, answer: WriteResult | Exception) -> None:
        """Take a batch's answer for this lock's gathered outcome. An error is tried again on
        its own as `succeed` or `fail` would (a write that got through is recognised by its
        token); a refusal raises `LeaseLost`, as theirs does. Either way the beat stops: no
        later write of this holder's will come, so a key left IN_PROGRESS frees in one lease."""
        store = self._writer()
        lock, error = finish.lock, finish.error
        self._gathered = False
        what = "succeed" if error is None else "fail"
        try:
            if not isinstance(answer, Exception):
                self._checked(answer, what)
            elif isinstance(answer, CommitFailed | CommitUnknown):
                # The completion carried a transaction that did not (or may not) commit: a
                # bare retry would record work whose writes are gone. As `succeed` raises it.
                self._succeeding = not isinstance(answer, CommitFailed)  # failing is safe again
                raise answer
            elif error is None:  # the batch's write was the first of COMPLETE_ATTEMPTS
                self._write(lambda: store.complete(lock, finish.result), what, AFTER_BATCH)
            else:
                self._write(lambda: store.fail(lock, error), what, AFTER_BATCH)
        finally:
            self._end_beat()
            self._discard()  # committed with the outcome, or nothing will commit it now
        self._outcome = Status.COMPLETED if error is None else Status.FAILED
        observability.count_lock_event(FINISHED, self.scope)

    def fail(self, error: BaseException | ErrorInfo | str, retryable: bool | None = None) -> str:
        """Record FAILED with `error`, kept for a person and for the next `begin`.

        A retryable failure lets the next `begin` take the key again; a permanent one keeps it
        FAILED until an operator resets it. By default an ErrorInfo keeps its own flag, an
        exception is retryable unless it is a PermanentError, and a message is retryable.
        Returns the permanent failure's replay nonce (what a dead-lettered copy carries so
        that its replay may run again), "" for a retryable one.
        """
        lock = self._unfinished()
        store = self._writer()
        if self._succeeding:
            raise RuntimeError(
                "succeed was already tried, so the work is done: failing now would let it run "
                "again. The record stays IN_PROGRESS until its lease ends; call succeed again."
            )
        info = error_info(error, retryable)
        self._lent = None  # the failure rolls it back
        written = self._write(lambda: store.fail(lock, info), "fail")
        self._outcome = Status.FAILED
        self._end_beat()
        observability.count_lock_event(FINISHED, self.scope)
        return written.replay_nonce or ""

    @property
    def transaction(self) -> Any:
        """The open transaction that commits with `succeed` (PostgreSQL store only); refused
        once the outcome is written, as nothing would commit it any more, and refused to a
        durable execution's lock (see durable.TRANSACTION_REFUSED: a suspension rolls it back,
        and the replay does not run the checkpointed step that wrote in it again). Inside a step
        (`step`) it is the step's own transaction, for every lock: it commits with the step's
        recovery point."""
        step = running_step(self)
        if step is not None:
            return step.transaction  # inside a step, its writes commit with the step
        lock = self._unfinished()
        if self.durable_execution is not None:
            raise ConfigurationError(durable.TRANSACTION_REFUSED)
        self._lent = self._writer().transaction(lock)
        return self._lent

    def holds_uncommitted_writes(self) -> bool:
        """The transaction lent to the block has written something that no outcome committed
        or rolled back yet (PostgreSQL gives a transaction its id at its first write). One
        that cannot be asked (broken, aborted) counts as having written."""
        if self._lent is None:
            return False
        try:
            row = self._lent.execute("SELECT txid_current_if_assigned() IS NOT NULL").fetchone()
        except Exception:
            return True
        return bool(row and row[0])

    def abandon(self) -> None:
        """Roll back the open transaction, if any; the entry points call it when the work ends,
        so one that ended without an outcome (a lease lost) never leaves a connection open.
        A gathered outcome is still to be written: its beat and its transaction (which a
        context may have opened through the store, and which commits with the completion)
        wait for `settle`."""
        self._lent = None
        if self._gathered:
            return
        self._end_beat()
        self._discard()

    def _discard(self) -> None:
        if self._store is not None and self._lock is not None:
            self._store.discard(self._lock)

    def hold_with(self, beat: heartbeat.Beat) -> None:
        """Keep the key by `beat`'s renewals until an outcome is written or the work ends."""
        self._beat = beat

    @property
    def heartbeat_lost(self) -> bool:
        """A background renewal was refused: another holder owns the key now, and this
        holder's outcome will be refused (LeaseLost)."""
        return self._beat is not None and self._beat.lost

    def _end_beat(self) -> None:
        if self._beat is not None:
            self._beat.stop()

    def _held(self) -> Lock:
        if self._lock is None:
            raise RuntimeError("this OnceLock holds no lock")
        # The heartbeat's lock is this one renewed (same token, a later lease end).
        return self._lock if self._beat is None else self._beat.lock

    def _writer(self) -> Store:
        if self._store is None:
            raise RuntimeError("this OnceLock has no store")
        return self._store

    def _unfinished(self) -> Lock:
        if self._outcome is not None:
            raise RuntimeError(f"{self.key!r}: the outcome is already recorded ({self._outcome})")
        return self._held().own()  # a clone's copy is refused before any retry

    def _write(
        self, write: Callable[[], WriteResult], what: str, attempts: int = COMPLETE_ATTEMPTS
    ) -> WriteResult:
        """A fenced write, tried again on errors while the invocation has time (a script:
        `attempts` times); each recognises its own lost reply, so a retry is safe."""
        written = write_durably(write, self.lambda_context, self.reserve_ms, attempts)
        return self._checked(written, what)

    def _checked(self, written: WriteResult, what: str) -> WriteResult:
        """`written`, or LeaseLost naming the record's holder now when it was refused."""
        if written.ok:
            return written
        now = written.current
        holder = (
            f"now {now.status} at fence {now.fence} (owner {now.owner})"
            if now
            else "the record is gone"
        )
        self._end_beat()
        raise LeaseLost(f"{what} refused for {self.key!r} at fence {self.fence}: {holder}")


def error_info(error: BaseException | ErrorInfo | str, retryable: bool | None) -> ErrorInfo:
    """The ErrorInfo `fail` records (see OnceLock.fail for the defaults)."""
    if isinstance(error, ErrorInfo):
        return error if retryable is None else replace(error, retryable=retryable)
    if isinstance(error, BaseException):
        if retryable is None:
            retryable = not isinstance(error, PermanentError)
        return ErrorInfo.from_exception(error, retryable=retryable)
    return ErrorInfo("Failed", str(error)[: ErrorInfo.MAX_MESSAGE], retryable is not False)


def positive_ms(seconds: float, name: str) -> int:
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{name} must be a positive number of seconds, got {seconds!r}")
    return max(1, math.ceil(seconds * 1000))
