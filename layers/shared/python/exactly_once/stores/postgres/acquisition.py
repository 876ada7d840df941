"""Taking a record: the acquire, and what a refusal means.

The acquire is ONE statement (statements.ACQUIRE) whose `RETURNING` row is the lock, and a
refusal returns the row that refused it from the same statement, so a duplicate costs one
round trip, as on DynamoDB. The rest of this module is the judgement of that row, in the
DynamoDB store's order: a row that still looks acquirable is never trusted (the statement
runs again, `STALE_READS` times), and an expired lease of a consumer that blocks takeovers is
marked FAILED for a person instead (`_block`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from typing import Any

from exactly_once.keys import storable_key
from exactly_once.stores.codec import sanitise
from exactly_once.stores.postgres import statements
from exactly_once.stores.postgres.base import StoreBase
from exactly_once.stores.postgres.ids import db_id, db_key
from exactly_once.stores.postgres.rows import record_from_row
from exactly_once.stores.records import (
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Lock,
    StoredRecord,
)
from exactly_once.stores.schema import Status

STALE_READS = 3  # a refusal whose row looks acquirable: run the statement again this often


@dataclass(frozen=True)
class _Request:
    """One call to `acquire`: what it asks for, and the given clock's reading it decides by
    (None: the server's clock, read by each statement)."""

    record_id: str
    scope: str
    token: str
    fingerprint: str | None
    block_takeover: bool
    replay_nonce: str | None
    at_ms: int | None
    resume_id: str | None = None

    def lock(self, row: dict[str, Any]) -> Lock:
        """The lock the row grants: its fence, attempt and the lease end it was written with."""
        return Lock(
            self.record_id,
            self.token,
            int(row["fence"]),
            int(row["attempts"]),
            int(row["lease_expires_at_ms"]),
            self.scope,
        )


class Acquiring(StoreBase):
    """The store's `acquire`."""

    def acquire(
        self,
        scope: str,
        key: str,
        *,
        lease_ms: int,
        owner: str,
        fingerprint: str | None = None,
        block_takeover: bool = False,
        replay_nonce: str | None = None,
        expected_duration_ms: int | None = None,
        resume_id: str | None = None,
    ) -> Acquisition:
        """Take the record in one statement; a refusal comes back with the row that refused.

        `resume_id`: as on DynamoDB, an IN_PROGRESS row with the same id is this holder's own
        lock from an earlier invocation, resumed with a new token and fence."""
        req, params = self._request(
            scope,
            key,
            lease_ms=lease_ms,
            owner=owner,
            fingerprint=fingerprint,
            block_takeover=block_takeover,
            replay_nonce=replay_nonce,
            expected_duration_ms=expected_duration_ms,
            resume_id=resume_id,
        )
        return self._acquire(req, params)

    def _request(
        self,
        scope: str,
        key: str,
        *,
        lease_ms: int,
        owner: str,
        fingerprint: str | None,
        block_takeover: bool,
        replay_nonce: str | None,
        expected_duration_ms: int | None,
        resume_id: str | None,
    ) -> tuple[_Request, dict[str, Any]]:
        """One acquire: its request (a fresh token) and the statement's bound values. A batch
        (batch_acquire.py) builds its keys' here too, so a key it hands to `_acquire` keeps the
        token the batch statement may already have written."""
        req = _Request(
            record_id=db_id(scope, key),
            scope=scope,
            token=secrets.token_hex(16),
            fingerprint=fingerprint,
            block_takeover=block_takeover,
            replay_nonce=replay_nonce or None,
            at_ms=self._at(),
            # Text as PostgreSQL can hold it, as keys are (a NUL or a lone surrogate: hashed).
            resume_id=db_key(storable_key(resume_id)) if resume_id else None,
        )
        params = {
            "id": req.record_id,
            "scope": sanitise(scope),
            "tok": req.token,
            "owner": sanitise(owner),
            "at_ms": req.at_ms,
            "lease_ms": lease_ms,
            "record_ttl_s": self.record_ttl_s,
            "fp": fingerprint,
            "xdur": expected_duration_ms,
            "block": block_takeover,
            "nonce": req.replay_nonce,
            "rid": req.resume_id,
        }
        return req, params

    def _acquire(self, req: _Request, params: dict[str, Any]) -> Acquisition:
        """ACQUIRE for one request, until its answer can be trusted (STALE_READS)."""
        import psycopg

        for _ in range(STALE_READS):
            try:
                rows = self._run(lambda conn: self._rows(conn, statements.ACQUIRE, params))
            except psycopg.errors.LockNotAvailable:
                # A holder's transaction holds the row (a completion committing, or a frozen
                # holder): in progress, as DynamoDB would say of a live lease.
                return Acquisition(AcquireStatus.IN_PROGRESS, record=self.get_by_id(req.record_id))
            if not rows:
                continue  # the conflicting row is newer than this statement's snapshot
            row = rows[0]
            record = record_from_row(row)
            if row["won"]:
                return Acquisition(
                    AcquireStatus.ACQUIRED,
                    lock=req.lock(row),
                    takeover=row["acquired_over"] == Status.IN_PROGRESS,
                    retry=row["acquired_over"] == Status.FAILED,
                    resumed=bool(row["resumed"]),
                )
            if record.lock_token == req.token:
                # Our own insert committed and its reply was lost; the retry met it.
                return Acquisition(AcquireStatus.ACQUIRED, lock=req.lock(row))
            verdict = self._refused(record, req, int(row["now_ms"]))
            if verdict is not None:
                return verdict
        # Contended: the row kept changing under us. Judge by its latest state; one that still
        # looks acquirable is in progress (the queue redelivers, the API answers 409).
        read = self._read(req.record_id)
        current = None if read is None else read[0]
        verdict = (
            None
            if read is None
            else self._refused(read[0], replace(req, block_takeover=False), read[1])
        )
        return verdict or Acquisition(AcquireStatus.IN_PROGRESS, record=current)

    def _refused(self, record: StoredRecord, req: _Request, now_ms: int) -> Acquisition | None:
        """What a refusal means, in the DynamoDB store's order; None when the row would have
        been acquirable (so it is older than what refused us). `now_ms`: the clock the row was
        read by (the statement's)."""
        expired = record.is_expired(now_ms // 1000) and not record.lease_live(now_ms)
        own = req.resume_id is not None and record.resume_id == req.resume_id
        if expired:
            if req.block_takeover and record.status is Status.IN_PROGRESS and not own:
                return self._block(record, req)
            return None
        if req.fingerprint is not None and record.fingerprint not in (None, req.fingerprint):
            return Acquisition(AcquireStatus.FINGERPRINT_MISMATCH, record=record)
        if record.status is Status.COMPLETED:
            return Acquisition(AcquireStatus.ALREADY_COMPLETED, record=record)
        if record.status is Status.FAILED:
            error = record.error
            if (error is not None and error.retryable) or (
                req.replay_nonce is not None and record.replay_nonce == req.replay_nonce
            ):
                return None
            return Acquisition(AcquireStatus.FAILED_PERMANENTLY, record=record)
        if own:
            return None  # this holder's own lock: it would have been resumed
        if record.lease_expired(now_ms):
            return self._block(record, req) if req.block_takeover else None
        return Acquisition(AcquireStatus.IN_PROGRESS, record=record)

    def _block(self, record: StoredRecord, req: _Request) -> Acquisition:
        """Mark an expired lease FAILED for a person instead of taking it over (payments): its
        holder may have done the work and died before completing, and only a person can tell.
        A fresh token, so the blocked holder's late write is "lease lost", never its own."""
        error = ErrorInfo(
            "LeaseExpired",
            f"lease of {record.owner} (fence {record.fence}) expired before completion; "
            "takeover is blocked for this consumer, so a person must check and reset or replay",
            retryable=False,
        )
        params = {
            **self._failure_params(error),
            "at_ms": req.at_ms,
            "id": record.record_id,
            "tok": record.lock_token or "",
            "nonce": secrets.token_hex(16),
            "blocked": secrets.token_hex(16),
        }
        sql = statements.BLOCK
        rows = self._run(lambda conn: self._rows(conn, sql, params))
        if rows:
            return Acquisition(AcquireStatus.FAILED_PERMANENTLY, record=record_from_row(rows[0]))
        # The old holder finished (or someone else moved it) in between: report that state.
        read = self._read(record.record_id)
        if read is None:
            return Acquisition(AcquireStatus.IN_PROGRESS)  # gone: the next delivery takes it
        current, now_ms = read
        if current.lock_token == params["blocked"]:
            # Our own block committed and its reply was lost; the reconnect's retry met it.
            return Acquisition(AcquireStatus.FAILED_PERMANENTLY, record=current)
        verdict = self._refused(current, replace(req, block_takeover=False), now_ms)
        return verdict or Acquisition(AcquireStatus.IN_PROGRESS, record=current)
