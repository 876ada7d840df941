"""A step's recovery point on PostgreSQL: an atomic phase.

A step that writes gets a transaction of its own (`step_transaction`), apart from the holder's
completion transaction, and its recovery point is the last statement of it, with the COMMIT,
in one round trip (statements.STEP_AND_COMMIT): the step's writes commit exactly when its point
does, fenced on the lock, and roll back when the key was taken over. A step that wrote nothing
sends BEGIN, the point and COMMIT together. A reply that never came is settled by reading the
row, as the completion's is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from exactly_once.errors import CommitFailed, CommitUnknown, ConfigurationError
from exactly_once.stores.postgres import connections, statements
from exactly_once.stores.postgres.session import session_settings
from exactly_once.stores.postgres.transactions import LentTransactions, bound
from exactly_once.stores.records import Lock, StepPoint, WriteResult, WriteStatus
from exactly_once.stores.schema import Status

if TYPE_CHECKING:
    from psycopg import Connection

_STEP = "step:"  # the key of a step's open transaction beside the holder's own (`_open`)


class StepTransactions(LentTransactions):
    """The store's `step_transaction`, `record_step` and `discard_step`."""

    def step_transaction(self, lock: Lock) -> Connection[Any]:
        """The connection whose open transaction commits with the running step's point."""
        return self._lend(lock, _STEP + lock.token, self.step_pool)

    def discard_step(self, lock: Lock) -> None:
        if lock.inherited:
            return  # the parent's transaction: never ours to end
        with self._open_lock:
            conn = self._open.pop(_STEP + lock.token, None)
        if conn is not None:
            self._finish_quietly(conn, self.step_pool)

    def record_step(
        self, lock: Lock, point: StepPoint, writes: Sequence[dict[str, Any]] = ()
    ) -> WriteResult:
        """Commit the step's transaction (or an empty one) with its recovery point."""
        lock.own()
        if writes:
            raise ConfigurationError(
                "on PostgreSQL a step writes in its transaction (step.transaction), which "
                "commits with its recovery point; DynamoDB writes are not taken here"
            )
        with self._open_lock:
            conn = self._open.pop(_STEP + lock.token, None)
        begun = conn is not None
        if conn is None:
            conn = self.step_pool.getconn()
            connections.lend(conn, lent=True)
        import psycopg

        try:
            # Built here, inside: the connection is already out of `_open` and its pool, and
            # the statement timeout is first read now behind RDS Proxy
            # (IDEMPOTENCY_PG_SESSION_SETTINGS=server); a malformed one must not keep it out.
            params = {
                "id": lock.record_id,
                "tok": lock.token,
                "at_ms": self._at(),
                "pos": str(point.position),
                "point": json.dumps(point.to_json()),
                "timeout_ms": session_settings()["statement_timeout"],
            }
            sql = bound(conn, statements.STEP_AND_COMMIT, params)
            conn.execute(sql if begun else b"BEGIN; " + sql)
        except psycopg.errors.DivisionByZero:  # fenced out, or the position is taken
            self._finish_quietly(conn, self.step_pool)
            return self._settled(lock, point, None)
        except Exception as exc:
            self._finish_quietly(conn, self.step_pool)
            return self._settled(lock, point, exc)
        except BaseException:
            self._finish_quietly(conn, self.step_pool)
            raise
        self._finish(conn, self.step_pool)
        return WriteResult(WriteStatus.OK, lock=lock)

    def _settled(self, lock: Lock, point: StepPoint, cause: Exception | None) -> WriteResult:
        """A step's commit that was refused (`cause` None) or raised: the row says whether its
        point committed. Never a plain error: a retry after one would commit the point
        without the step's writes, which went with this connection."""
        try:
            return self._judged(lock, point, refused=cause is None)
        except CommitFailed as failed:
            raise CommitFailed(f"{failed} ({type(cause).__name__}: {cause})") from cause
        except CommitUnknown:
            raise
        except Exception as unreadable:
            raise CommitUnknown(
                f"{lock.record_id}: step {point.name!r}'s commit was "
                f"{'refused' if cause is None else 'lost: ' + type(cause).__name__} and the "
                "record cannot be read "
                f"({type(unreadable).__name__})"
            ) from cause

    def _judged(self, lock: Lock, point: StepPoint, *, refused: bool) -> WriteResult:
        current = self.get_by_id(lock.record_id)
        if current is None or current.lock_token != lock.token:
            return WriteResult(WriteStatus.LEASE_LOST, current=current)
        mine = current.steps.get(point.position)
        # Ours only when it is this very point (as on DynamoDB): an earlier attempt of the same
        # holder's with another result is not this write's reply, and going on with this
        # result, which never committed, would part the holder from its recovery point.
        if mine is not None and (mine.fence, mine.name, mine.result_text) == (
            lock.fence,
            point.name,
            point.result_text,
        ):
            return WriteResult(WriteStatus.OK, lock=lock)
        if mine is not None:
            return WriteResult(WriteStatus.LEASE_LOST, current=current)
        if refused or current.status is not Status.IN_PROGRESS:
            return WriteResult(WriteStatus.LEASE_LOST, current=current)
        raise CommitFailed(
            f"{lock.record_id}: step {point.name!r}'s transaction did not commit; none of its "
            "writes happened, and the holder still holds the key"
        )
