"""The fenced writes: complete, fail, release and extend.

Each is an UPDATE fenced on the lock token and IN_PROGRESS (statements.FENCED_WRITE); a
refusal whose row carries our token in the state the write leaves is our own earlier attempt
whose reply was lost (the same rule as DynamoDB's ALL_OLD check), so retrying any write is
safe. A completion whose holder opened a transaction goes through it instead
(transactions.py), so the business writes commit with it; a failure rolls that transaction
back first.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import Any

from exactly_once.stores.postgres import statements
from exactly_once.stores.postgres.transactions import LentTransactions
from exactly_once.stores.records import ErrorInfo, Lock, WriteResult, WriteStatus
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import StoredResult


class FencedWrites(LentTransactions):
    """The store's `complete`, `fail`, `release` and `extend`."""

    def complete(self, lock: Lock, result: Any = None) -> WriteResult:
        """Mark COMPLETED with the result (stored_result.StoredResult); in the holder's open
        transaction when it has one, so its business writes commit with it."""
        lock.own()  # before taking the transaction: an inherited one is the parent's
        kept = StoredResult.of(result, self.result_cap_bytes)
        params = {
            "id": lock.record_id,
            "tok": lock.token,
            "at_ms": self._at(),
            "record_ttl_s": self.record_ttl_s,
            "res": kept.text,
            "rsha": kept.sha256,
            "rsize": kept.size,
            "romit": kept.omitted,
        }
        conn = self._take(lock)
        if conn is not None:
            return self._complete_in(conn, lock, params)
        return self._fenced_write(lock, statements.COMPLETE, params, leaves=Status.COMPLETED)

    def fail(self, lock: Lock, error: ErrorInfo) -> WriteResult:
        """Keep the record FAILED with the error; an open transaction is rolled back first.
        A permanent failure gets a fresh nonce that only a real DLQ replay presents."""
        lock.own()  # before the rollback: an inherited transaction is the parent's
        self.discard(lock)
        params = {**self._failure_params(error), "at_ms": self._at(), "id": lock.record_id}
        params["tok"] = lock.token
        params["nonce"] = None if error.retryable else secrets.token_hex(16)
        return self._fenced_write(lock, statements.FAIL, params, leaves=Status.FAILED)

    def release(self, lock: Lock, reason: str = "released by its holder") -> WriteResult:
        """A retryable FAILED record rather than a deletion: deleting would reset the fence."""
        return self.fail(lock, ErrorInfo("Released", reason, retryable=True))

    def extend(self, lock: Lock, lease_ms: int) -> WriteResult:
        """Renew the lease (on its own connection: the holder's transaction stays open). The
        lock handed back carries the lease end the statement wrote."""
        params = {
            "id": lock.record_id,
            "tok": lock.token,
            "at_ms": self._at(),
            "lease_ms": lease_ms,
            "record_ttl_s": self.record_ttl_s,
        }
        return self._fenced_write(lock, statements.EXTEND, params, leaves=Status.IN_PROGRESS)

    def _fenced_write(
        self, lock: Lock, sets: str, params: dict[str, Any], leaves: Status
    ) -> WriteResult:
        lock.own()  # extend's check (complete and fail made theirs before their rollback)
        sql = statements.FENCED_WRITE.format(sets=sets, fenced=statements.FENCED)
        rows = self._run(lambda conn: self._rows(conn, sql, params))
        # Won, or refused by our own earlier attempt that committed and whose reply was lost.
        if rows and (
            rows[0]["won"] or (rows[0]["lock_token"] == lock.token and rows[0]["status"] == leaves)
        ):
            held = replace(lock, lease_expires_at_ms=int(rows[0]["lease_expires_at_ms"]))
            return WriteResult(WriteStatus.OK, lock=held, replay_nonce=rows[0]["replay_nonce"])
        return WriteResult(WriteStatus.LEASE_LOST, current=self.get_by_id(lock.record_id))
