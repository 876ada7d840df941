"""`once`: run any section of code to completion once per key, on the fenced store.

For code outside the queue and HTTP entry points: a script, an ECS task, a Step Functions
task, a handler written by hand. `begin` either takes the key's lock or says what became of
the key: completed (with its stored result), still in progress (until its lease ends), failed
(with its error), or used for other input (a fingerprint mismatch). The lock then ends with
`succeed(result)` or `fail(error)`. Both are fenced: a holder that outlived its lease while
another took the key over (a zombie) cannot overwrite its successor's outcome, and learns it
from `LeaseLost`, as the fenced effects (`effects.put_once`) it may try also tell it.

    with once("reports", "2024-06-01", expected_duration_s=300) as claim:
        if claim.acquired:
            build_the_report()  # a raise records FAILED (retryable unless PermanentError)
        else:
            print(claim.status, claim.result)

The module is not named `once` so that `exactly_once.once` stays the function even after the
module has been imported (a submodule becomes an attribute of its package).
"""

from __future__ import annotations

import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import TracebackType
from typing import Any, Literal

from exactly_once import durable, heartbeat, lifecycle, observability
from exactly_once.completion import write_durably
from exactly_once.config import store_settings
from exactly_once.context import LockedContext
from exactly_once.effects import LeaseLost
from exactly_once.errors import CommitFailed, ConfigurationError, PermanentError
from exactly_once.keys import storable_key
from exactly_once.lease import LeasePolicy
from exactly_once.lease import owner as lambda_owner
from exactly_once.stores.protocol import Store, open_store
from exactly_once.stores.records import AcquireStatus, ErrorInfo, Lock, StoredRecord, WriteResult
from exactly_once.stores.schema import Status


class ClaimStatus(StrEnum):
    ACQUIRED = "acquired"  # this caller holds the lock: do the work
    COMPLETED = "completed"  # done before: `result` is what it returned
    IN_PROGRESS = "in_progress"  # another holder's lease is live until `lease_ends_at`
    FAILED = "failed"  # failed permanently (or takeover was blocked): `error` says why
    MISMATCH = "mismatch"  # the key was used with another fingerprint


STARTED = "Started"  # a lock was taken: work began
FINISHED = "Finished"  # its outcome (COMPLETED or FAILED) was written
"""Lock metrics, emitted at once per event: `Started - Finished` over a window is work that
began and has no recorded outcome (a crash, a timeout, a zombie). The stack alarms on it."""

_FROM_ACQUIRE = {
    AcquireStatus.ACQUIRED: ClaimStatus.ACQUIRED,
    AcquireStatus.ALREADY_COMPLETED: ClaimStatus.COMPLETED,
    AcquireStatus.IN_PROGRESS: ClaimStatus.IN_PROGRESS,
    AcquireStatus.FAILED_PERMANENTLY: ClaimStatus.FAILED,
    AcquireStatus.FINGERPRINT_MISMATCH: ClaimStatus.MISMATCH,
}


@dataclass(frozen=True)
class _OnceStore:
    """The store settings `begin` resolved (stores.StoreSettings)."""

    table_name: str | None
    dsn: str | None
    record_ttl_s: int
    failed_ttl_s: int
    result_cap_bytes: int = 64 * 1024
    # Its margin is the clock skew the DynamoDB store tolerates (IdempotencyStore.configured):
    # without it the store judged skew by the default margin, not LEASE_MARGIN_MS.
    lease: LeasePolicy | None = None


class NotAcquired(RuntimeError):
    """`claim.lock` of a claim that did not acquire: check `claim.acquired` first."""


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
        written = self._write(lambda: store.extend(lock, _ms(seconds, "seconds")), "extend")
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
        and the replay does not run the checkpointed step that wrote in it again)."""
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
        so one that ended without an outcome (a lease lost) never leaves a connection open."""
        self._lent = None
        self._end_beat()
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

    def _write(self, write: Callable[[], WriteResult], what: str) -> WriteResult:
        """A fenced write, tried again on errors while the invocation has time (a script:
        COMPLETE_ATTEMPTS times); each recognises its own lost reply, so a retry is safe."""
        written = write_durably(write, self.lambda_context, self.reserve_ms)
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


@dataclass(frozen=True)
class Claim:
    """What `begin` found: the lock (ACQUIRED), or the key's existing outcome."""

    status: ClaimStatus
    scope: str
    key: str
    record: StoredRecord | None = None  # the record that refused the lock (not ACQUIRED)
    takeover: bool = False  # ACQUIRED over an earlier holder's expired lease
    retry: bool = False  # ACQUIRED over a retryable FAILED record
    resumed: bool = False  # ACQUIRED over this holder's own lock (a durable replay)
    _lock: OnceLock | None = field(default=None, repr=False)

    @property
    def acquired(self) -> bool:
        return self.status is ClaimStatus.ACQUIRED

    @property
    def lock(self) -> OnceLock:
        """The lock; raises NotAcquired unless `acquired`."""
        if self._lock is None:
            raise NotAcquired(f"{self.key!r} was not acquired: it is {self.status}")
        return self._lock

    @property
    def result(self) -> Any:
        """COMPLETED: the stored result with its types (None when it was not storable)."""
        if self.status is not ClaimStatus.COMPLETED or self.record is None:
            return None
        return self.record.result

    @property
    def result_omitted(self) -> str | None:
        """COMPLETED without a stored result: why (over the size cap, not storable)."""
        if self.status is not ClaimStatus.COMPLETED or self.record is None:
            return None
        return self.record.result_omitted

    @property
    def lease_ends_at(self) -> float | None:
        """Epoch seconds: ACQUIRED, this lock's lease; IN_PROGRESS, the other holder's (after
        it, `begin` takes the key over unless takeover is blocked)."""
        if self._lock is not None:
            return self._lock.lease_ends_at
        if self.status is ClaimStatus.IN_PROGRESS and self.record is not None:
            ends = self.record.lease_expires_at_ms
            return None if ends is None else ends / 1000
        return None

    @property
    def error(self) -> ErrorInfo | None:
        """FAILED: what failed; a blocked takeover is a permanent `LeaseExpired`."""
        if self.status is ClaimStatus.FAILED and self.record is not None:
            return self.record.error
        return None

    @property
    def retryable(self) -> bool:
        error = self.error
        return error is not None and error.retryable

    @property
    def owner(self) -> str | None:
        """Who holds (ACQUIRED, IN_PROGRESS) or last held the key."""
        if self._lock is not None:
            return self._lock.owner
        return self.record.owner if self.record else None


def begin(
    scope: str,
    key: str,
    *,
    expected_duration_s: float | None = None,
    lease_s: float | None = None,
    owner: str | None = None,
    fingerprint: str | None = None,
    block_takeover: bool | None = None,
    table_name: str | None = None,
    dsn: str | None = None,
    store: Store | None = None,
    lambda_context: Any = None,
    resume_id: str | None = None,
) -> Claim:
    """Take the lock on (scope, key), or say what became of the key. One conditional write.

    - `expected_duration_s`: how long the work should take. It is stored (`expected_by`) for
      a monitor of slow work, and the lease is this plus the lease margin (LEASE_MARGIN_MS,
      default 5 s), so a takeover waits until the holder is surely late, not merely slow.
    - `lease_s`: the lease itself, instead of one derived from the expected duration. With
      neither, the lease is the invocation's remaining time plus the margin in Lambda (given
      `lambda_context`), else 60 s plus the margin; the work is expected by the lease's end.
    - `owner`: who holds the key, for people reading the record (default: host and pid, or
      the function and request id in Lambda; then this process's instance id). Fenced
      effects record it as their origin.
    - `fingerprint`: a digest of the input (`codec.fingerprint`); the same key with another
      one is a MISMATCH, never run.
    - `block_takeover`: an expired lease is not taken over but made FAILED for a person (for
      work that must never repeat); default BLOCK_EXPIRED_LEASES.
    - `key`: any text; one too long for a partition key, that is not valid UTF-8, or that
      starts with `sha256:`, is stored as its SHA-256 (`claim.key` says which).
    - `store`, else `table_name` (DynamoDB) or `dsn` (PostgreSQL), else IDEMPOTENCY_TABLE or
      IDEMPOTENCY_DSN (with RECORD_TTL_SECONDS and FAILED_TTL_SECONDS) name the store.
    - `resume_id`: names a holder that outlives one invocation; its next invocation resumes
      the key's IN_PROGRESS lock (new token and fence) instead of finding it in progress. A
      durable function's DurableContext given as `lambda_context` sets it to the execution's
      ARN (see durable.py); such a lock must be given `lease_s` or `expected_duration_s`
      covering the whole execution, waits included, or another execution could take it over
      while this one is suspended.

    Raises what DynamoDB raises when it stays unreachable through botocore's retries.
    """
    if not scope or not key:
        raise ValueError("scope and key must be non-empty")
    # As for queue keys: too long for a partition key, or not UTF-8 (a lone surrogate), the
    # record is keyed by its SHA-256, never refused.
    key = storable_key(key)
    arn = durable.execution_arn(lambda_context)
    if arn is not None:
        if lease_s is None and expected_duration_s is None:
            raise ConfigurationError(
                "a durable execution may suspend inside the block for longer than one "
                "invocation: give once/begin lease_s (or expected_duration_s) covering the "
                "execution, waits included"
            )
        resume_id = resume_id or arn
        lambda_context = durable.lambda_context(lambda_context)
    given: dict[str, Any] = {
        "table_name": table_name,
        "dsn": dsn,
        "scope": scope,
    }
    settings = store_settings(given, "ONCE_SCOPE", store_given=store is not None)
    if store is None:
        store = open_store(
            _OnceStore(
                settings["table_name"],
                settings["dsn"],
                settings["record_ttl_s"],
                settings["failed_ttl_s"],
                lease=settings["lease"],
            )
        )
    policy: LeasePolicy = settings["lease"]
    if lease_s is not None:
        lease_ms = _ms(lease_s, "lease_s")
    elif expected_duration_s is not None:
        lease_ms = _ms(expected_duration_s, "expected_duration_s") + policy.margin_ms
    else:
        lease_ms = policy.lease_ms(lambda_context)
    # Always written, so an earlier holder's `expected_by` never outlives its attempt.
    expected_ms = (
        lease_ms if expected_duration_s is None else _ms(expected_duration_s, "expected_duration_s")
    )
    holder = owner or (
        lambda_owner(lambda_context)
        if lambda_context is not None
        else f"{socket.gethostname()}:{os.getpid()}:{lifecycle.instance_id()}"
    )
    return claim(
        store,
        scope,
        key,
        lease_ms=lease_ms,
        owner=holder,
        fingerprint=fingerprint,
        block_takeover=settings["block_takeover"] if block_takeover is None else block_takeover,
        expected_duration_ms=expected_ms,
        lambda_context=lambda_context,
        resume_id=resume_id,
        durable_execution=arn,
        heartbeat_ms=policy.heartbeat_ms,
    )


def claim(
    store: Store,
    scope: str,
    key: str,
    *,
    lease_ms: int,
    owner: str,
    fingerprint: str | None = None,
    block_takeover: bool = False,
    expected_duration_ms: int | None = None,
    replay_nonce: str | None = None,
    lambda_context: Any = None,
    reserve_ms: float = 0.0,
    resume_id: str | None = None,
    durable_execution: str | None = None,
    heartbeat_ms: int | None = None,
) -> Claim:
    """The one state machine's entry, with every setting resolved: `begin` for a caller that
    already knows its store and lease (the queue, topic and HTTP entry points).

    One conditional write. ACQUIRED hands back an `OnceLock`, whose fenced `succeed` and
    `fail` are the only ways an outcome is written; anything else is the key's existing state.
    `replay_nonce`: a dead-lettered message's, which may run a permanently FAILED key again.
    `reserve_ms`: the lock's writes stop retrying with this much of the invocation left.
    `durable_execution`: the ARN of the durable execution holding the lock (its lock lends no
    transaction, see OnceLock.transaction).
    `heartbeat_ms`: a `lease_ms` longer than this is held as this short lease, renewed in the
    background while the lock is held and never past `lease_ms` from now (heartbeat.py), so a
    holder that dies frees the key within it; `expected_by` then says when `lease_ms` ends.
    Never for a holder that outlives the invocation (`resume_id`): nothing renews it between.
    Raises what DynamoDB raises when it stays unreachable through botocore's retries.
    """
    beat_ms = None if resume_id else heartbeat.short_lease(lease_ms, heartbeat_ms)
    # The record says when the long lease would end: the holder may run on until then (the
    # queue defers an in-progress duplicate that long, a monitor reads it). Always written:
    # both stores keep an earlier holder's `expected_by` when none is given, and a heartbeat
    # holder's (its whole budget) must never stand for a later holder's short lease.
    expected_ms = expected_duration_ms if expected_duration_ms is not None else lease_ms
    started = time.monotonic()
    acquisition = store.acquire(
        scope,
        key,
        lease_ms=beat_ms or lease_ms,
        owner=owner,
        fingerprint=fingerprint,
        block_takeover=block_takeover,
        replay_nonce=replay_nonce,
        expected_duration_ms=expected_ms,
        resume_id=resume_id,
    )
    if acquisition.lock is None:
        return Claim(_FROM_ACQUIRE[acquisition.status], scope, key, record=acquisition.record)
    observability.count_lock_event(STARTED, scope)
    claimed = Claim(
        ClaimStatus.ACQUIRED,
        scope,
        key,
        takeover=acquisition.takeover,
        retry=acquisition.retry,
        resumed=acquisition.resumed,
        _lock=OnceLock(
            store,
            acquisition.lock,
            key,
            owner,
            lambda_context,
            reserve_ms=reserve_ms,
            durable_execution=durable_execution,
        ),
    )
    if beat_ms is not None:
        until = started + lease_ms / 1000
        claimed.lock.hold_with(heartbeat.hold(store, acquisition.lock, beat_ms, until))
    return claimed


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


def once(
    scope: str,
    key: str,
    *,
    expected_duration_s: float | None = None,
    lease_s: float | None = None,
    owner: str | None = None,
    fingerprint: str | None = None,
    block_takeover: bool | None = None,
    table_name: str | None = None,
    dsn: str | None = None,
    store: Store | None = None,
    lambda_context: Any = None,
    resume_id: str | None = None,
) -> OnceBlock:
    """`begin` as a context manager (see OnceBlock): `with once(scope, key) as claim:`."""
    return OnceBlock(
        lambda: begin(
            scope,
            key,
            expected_duration_s=expected_duration_s,
            lease_s=lease_s,
            owner=owner,
            fingerprint=fingerprint,
            block_takeover=block_takeover,
            table_name=table_name,
            dsn=dsn,
            store=store,
            lambda_context=lambda_context,
            resume_id=resume_id,
        )
    )


def error_info(error: BaseException | ErrorInfo | str, retryable: bool | None) -> ErrorInfo:
    """The ErrorInfo `fail` records (see OnceLock.fail for the defaults)."""
    if isinstance(error, ErrorInfo):
        return error if retryable is None else replace(error, retryable=retryable)
    if isinstance(error, BaseException):
        if retryable is None:
            retryable = not isinstance(error, PermanentError)
        return ErrorInfo.from_exception(error, retryable=retryable)
    return ErrorInfo("Failed", str(error)[: ErrorInfo.MAX_MESSAGE], retryable is not False)


def _ms(seconds: float, name: str) -> int:
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{name} must be a positive number of seconds, got {seconds!r}")
    return max(1, math.ceil(seconds * 1000))
