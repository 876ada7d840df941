"""`claim`: the one state machine's entry, and the `Claim` it answers with.

One conditional write on (scope, key): either this caller now holds the key (an `OnceLock`,
held_lock.py) or the `Claim` says what became of it (completed with its result, in progress
until a lease ends, failed, or used for other input). Every entry point takes its keys here:
the queue consumer, the SNS subscriber, the HTTP API, and `begin` (once_lock.py) once it has
resolved its settings. Kept apart from those settings so the entry points, which know their
store and lease, load only this.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from exactly_once import heartbeat, observability
from exactly_once.held_lock import STARTED, OnceLock
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import (
    AcquireRequest,
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    StoredRecord,
)


class ClaimStatus(StrEnum):
    ACQUIRED = "acquired"  # this caller holds the lock: do the work
    COMPLETED = "completed"  # done before: `result` is what it returned
    IN_PROGRESS = "in_progress"  # another holder's lease is live until `lease_ends_at`
    FAILED = "failed"  # failed permanently (or takeover was blocked): `error` says why
    MISMATCH = "mismatch"  # the key was used with another fingerprint


_FROM_ACQUIRE = {
    AcquireStatus.ACQUIRED: ClaimStatus.ACQUIRED,
    AcquireStatus.ALREADY_COMPLETED: ClaimStatus.COMPLETED,
    AcquireStatus.IN_PROGRESS: ClaimStatus.IN_PROGRESS,
    AcquireStatus.FAILED_PERMANENTLY: ClaimStatus.FAILED,
    AcquireStatus.FINGERPRINT_MISMATCH: ClaimStatus.MISMATCH,
}


class NotAcquired(RuntimeError):
    """`claim.lock` of a claim that did not acquire: check `claim.acquired` first."""


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
    holding = _Holding(store, lambda_context, reserve_ms, durable_execution, started)
    return holding.claim(acquisition, scope, key, owner, lease_ms, beat_ms)


def claim_many(
    store: Store,
    requests: Sequence[AcquireRequest],
    *,
    lambda_context: Any = None,
    reserve_ms: float = 0.0,
    heartbeat_ms: int | None = None,
) -> list[Claim | Exception]:
    """`claim` for each of a batch's keys (all distinct), with the store's `acquire_many`: one
    round trip where the backend allows. Each request's `lease_ms` is the long lease, as
    `claim` takes it (a heartbeat holds it as the short one). One key's error is its answer
    and never fails another's."""
    beats = [heartbeat.short_lease(req.lease_ms, heartbeat_ms) for req in requests]
    started = time.monotonic()
    answers = store.acquire_many(
        [
            replace(
                req,
                lease_ms=beat or req.lease_ms,
                expected_duration_ms=req.expected_duration_ms or req.lease_ms,
            )
            for req, beat in zip(requests, beats, strict=True)
        ]
    )
    holding = _Holding(store, lambda_context, reserve_ms, None, started)
    return [
        answer
        if isinstance(answer, Exception)
        else holding.claim(answer, req.scope, req.key, req.owner, req.lease_ms, beat)
        for req, beat, answer in zip(requests, beats, answers, strict=True)
    ]


class _Holding:
    """What turns an acquisition into a `Claim`: the lock's store, its invocation, and when
    the acquire started (a heartbeat's long lease counts from then). A plain class: a frozen
    dataclass compiles six generated methods at import (~0.8 ms of a cold start) that nothing
    here uses."""

    __slots__ = ("durable_execution", "lambda_context", "reserve_ms", "started", "store")

    def __init__(
        self,
        store: Store,
        lambda_context: Any,
        reserve_ms: float,
        durable_execution: str | None,
        started: float,
    ) -> None:
        self.store = store
        self.lambda_context = lambda_context
        self.reserve_ms = reserve_ms
        self.durable_execution = durable_execution
        self.started = started

    def claim(
        self,
        acquisition: Acquisition,
        scope: str,
        key: str,
        owner: str,
        lease_ms: int,
        beat_ms: int | None,
    ) -> Claim:
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
                self.store,
                acquisition.lock,
                key,
                owner,
                self.lambda_context,
                reserve_ms=self.reserve_ms,
                durable_execution=self.durable_execution,
            ),
        )
        until = self.started + lease_ms / 1000  # the lease, or the beat's bound
        claimed.lock.held_until = until
        if beat_ms is not None:
            claimed.lock.hold_with(heartbeat.hold(self.store, acquisition.lock, beat_ms, until))
        return claimed
