"""The holder's transaction: the connection lent as `ctx.transaction`, and the completion that
commits the holder's business writes with its COMPLETED record, or rolls them back.

This is what the PostgreSQL store adds to the state machine, and where a connection can be
lost: every path gives the lent connection back to its pool (rolled back, or discarded when
broken), including an interruption mid-statement. The completion and its COMMIT go in one
round trip (statements.COMPLETE_AND_COMMIT); a reply that never came is settled by reading the
row (`_settle`).
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any

from exactly_once.errors import CommitFailed, CommitUnknown
from exactly_once.stores.postgres import connections, statements
from exactly_once.stores.postgres.base import StoreBase
from exactly_once.stores.postgres.session import session_settings
from exactly_once.stores.records import Lock, WriteResult, WriteStatus
from exactly_once.stores.schema import Status

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool


class LentTransactions(StoreBase):
    """The store's `transaction` and `discard`, and the completion in the lent transaction."""

    def transaction(self, lock: Lock) -> Connection[Any]:
        """The connection whose open transaction commits with this lock's completion.

        BEGIN is sent here, so a `with conn.transaction():` block of the holder's is a savepoint
        inside it, never a commit of its own; commit, rollback and close are refused while the
        connection is lent (connections.HolderConnection). The record's row is not locked by
        it: a takeover stays possible while the business writes run, and the completion,
        fenced on the token, then fails and rolls them back. The holder's statements run under
        the database's own statement_timeout, not the store's (statements.BEGIN).
        """
        return self._lend(lock, lock.token, self.transaction_pool)

    def _lend(
        self, lock: Lock, slot: str, pool: ConnectionPool[Connection[Any]]
    ) -> Connection[Any]:
        """The connection open under `slot` (the holder's token, or its running step's), or one
        from `pool` with BEGIN sent, lent under it."""
        lock.own()  # a fork child's copy of the parent's lock is refused (LockInherited)
        with self._open_lock:
            conn = self._open.get(slot)
        if conn is not None:
            return conn
        # Never wait for a pooled connection under the lock: the holders that would give one
        # back take the lock to complete, and would wait for us in turn. A token is one
        # holder's, used by one thread at a time, so no one else opens it meanwhile.
        conn = pool.getconn()
        try:
            conn.execute(statements.BEGIN)
        except BaseException:
            pool.putconn(conn)
            raise
        connections.lend(conn, lent=True)
        with self._open_lock:
            self._open[slot] = conn
        return conn

    def discard(self, lock: Lock) -> None:
        if lock.inherited:
            return  # the parent's transaction, on the parent's socket: never ours to end
        conn = self._take(lock)
        if conn is not None:
            self._finish_quietly(conn)

    def _take(self, lock: Lock) -> Connection[Any] | None:
        with self._open_lock:
            return self._open.pop(lock.token, None)

    def _finish(
        self, conn: Connection[Any], pool: ConnectionPool[Connection[Any]] | None = None
    ) -> None:
        """Take the connection back: roll back what is still open, return it to its pool (the
        transaction pool unless said)."""
        from psycopg.pq import TransactionStatus

        connections.lend(conn, lent=False)
        try:
            if conn.info.transaction_status is not TransactionStatus.IDLE:
                conn.rollback()
        finally:
            # A broken connection is discarded by the pool.
            (self.transaction_pool if pool is None else pool).putconn(conn)

    def _finish_quietly(
        self, conn: Connection[Any], pool: ConnectionPool[Connection[Any]] | None = None
    ) -> None:
        with contextlib.suppress(Exception):  # broken: the pool has discarded it
            self._finish(conn, pool)

    def _complete_in(
        self, conn: Connection[Any], lock: Lock, params: dict[str, Any]
    ) -> WriteResult:
        """The completion as the last statement of the holder's transaction, and the COMMIT,
        sent together in one round trip (statements.COMPLETE_AND_COMMIT).

        Fenced: a holder whose lease was taken over finds no row to update, the statement
        fails, and everything it wrote rolls back with it. A reply that never came is settled
        by reading the row (`_settle`).
        """
        import psycopg

        try:
            # Read here, inside: the settings are first read by this statement behind RDS
            # Proxy (IDEMPOTENCY_PG_SESSION_SETTINGS=server), and a malformed one must not
            # keep the connection, already taken from `_open`, out of its pool.
            bounded = {**params, "timeout_ms": session_settings()["statement_timeout"]}
            conn.execute(bound(conn, statements.COMPLETE_AND_COMMIT, bounded))
        except psycopg.errors.DivisionByZero:  # no row matched: the lease was lost
            self._finish_quietly(conn)
            return WriteResult(WriteStatus.LEASE_LOST, current=self.get_by_id(lock.record_id))
        except Exception as exc:
            self._finish_quietly(conn)
            return self._settle(lock, exc)
        except BaseException:
            # Interrupted (KeyboardInterrupt, SystemExit, a cancellation), before or after the
            # server ran it: the connection still goes back (rolled back, or discarded by the
            # pool when mid-statement), and the interruption goes on; the row says what
            # committed.
            self._finish_quietly(conn)
            raise
        self._finish(conn)  # committed: nothing is left to roll back
        return WriteResult(WriteStatus.OK, lock=lock)

    def _settle(self, lock: Lock, cause: Exception) -> WriteResult:
        """A completion that raised: it committed or it did not, and the row says which.

        COMPLETED under our token: done (the reply was lost). IN_PROGRESS under our token:
        nothing committed, the holder still holds the key (CommitFailed: it fails the key, or
        its lease ends). Another holder's: ours could never commit (lease lost). Unreadable:
        CommitUnknown, and the record settles it later.
        """
        try:
            current = self.get_by_id(lock.record_id)
        except Exception as unreadable:
            raise CommitUnknown(
                f"{lock.record_id}: the commit's reply was lost ({type(cause).__name__}) and "
                f"the record cannot be read ({type(unreadable).__name__})"
            ) from cause
        if current is None or current.lock_token != lock.token:
            return WriteResult(WriteStatus.LEASE_LOST, current=current)
        if current.status is Status.COMPLETED:
            return WriteResult(WriteStatus.OK, lock=lock)
        raise CommitFailed(
            f"{lock.record_id}: the transaction did not commit ({type(cause).__name__}: {cause})"
        ) from cause


def bound(conn: Any, statement: str, params: dict[str, Any]) -> bytes:
    """`statement` with its `%(name)s` parameters as quoted literals (a multi-statement query
    cannot carry bound parameters)."""
    from psycopg import sql

    template = statement.replace("{", "{{").replace("}", "}}")
    template = re.sub(r"%\((\w+)\)s", r"{\1}", template)
    values = {name: sql.Literal(value) for name, value in params.items()}
    return sql.SQL(template).format(**values).as_string(conn).encode()
