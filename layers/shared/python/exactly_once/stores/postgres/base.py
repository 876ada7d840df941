"""What every part of the PostgreSQL store stands on: its settings and pools, running one
statement, and reading one record.

- Two pools (connections.pool): the store's own short statements, and the connections lent to
  holders as their transactions. In a clone (fork, SnapStart restore) the process's pools are
  fetched again, since the old ones' connections belong to the parent.
- `_run` tries a statement again when its connection broke: every statement is fenced or
  recognises its own earlier attempt (statements.py), so running one again is safe.
- `_at` is the clock every statement binds: None (the server's, clock.py) unless the store was
  given one.

The acquire (acquisition.py), the holder's transaction (transactions.py), the fenced writes
(writes.py) and the operator's reads (operations.py) are built on this; store.py joins them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from exactly_once import lifecycle
from exactly_once.stores.codec import sanitise
from exactly_once.stores.lifetimes import DAY_S, check_limits
from exactly_once.stores.postgres import connections, statements
from exactly_once.stores.postgres.ids import db_id
from exactly_once.stores.postgres.rows import record_from_row
from exactly_once.stores.records import ErrorInfo, StoredRecord

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg_pool import ConnectionPool

T = TypeVar("T")
ATTEMPTS = 3  # a statement whose connection broke is tried this often (it is fenced: safe)


def _reconnect_helps(exc: Exception) -> bool:
    """A broken or unobtainable connection (no SQLSTATE, or class 08, or the server shutting
    down) is worth another try; an error the server raised for the statement is not: a lock
    timeout would only wait again."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in {"57P01", "57P02", "57P03"}


class StoreBase:
    """The PostgreSQL store's state, its pools and its one-record reads."""

    def __init__(
        self,
        conninfo: str,
        *,
        record_ttl_s: int = 15 * DAY_S,
        failed_ttl_s: int = 30 * DAY_S,
        result_cap_bytes: int = 64 * 1024,
        clock: Callable[[], float] | None = None,
        pool: ConnectionPool[Connection[Any]] | None = None,
        transaction_pool: ConnectionPool[Connection[Any]] | None = None,
        step_pool: ConnectionPool[Connection[Any]] | None = None,
    ) -> None:
        """`pool` runs the store's statements, `transaction_pool` lends the holders their
        transactions and `step_pool` their steps' (by default the process's pools for the DSN,
        connections.pool).

        Leases and expiries are decided by the database server's clock. `clock` (epoch
        seconds) replaces it for tests that move time: every statement then decides by its
        reading, as the DynamoDB store does by the caller's clock."""
        check_limits(record_ttl_s, failed_ttl_s, result_cap_bytes)
        self.conninfo = conninfo
        self.record_ttl_s = record_ttl_s
        self.failed_ttl_s = failed_ttl_s
        self.result_cap_bytes = result_cap_bytes
        self._clock = clock
        self._pool = self._given_pool = pool
        self._transaction_pool = self._given_transaction_pool = transaction_pool
        self._step_pool = self._given_step_pool = step_pool
        self._generation = lifecycle.generation()
        # The holders' open business transactions, by lock token.
        self._open: dict[str, Connection[Any]] = {}
        self._open_lock = threading.Lock()

    @property
    def pool(self) -> ConnectionPool[Connection[Any]]:
        self._follow_clones()
        if self._pool is None:
            self._pool = connections.pool(self.conninfo, connections.STATEMENTS)
        return self._pool

    @property
    def transaction_pool(self) -> ConnectionPool[Connection[Any]]:
        self._follow_clones()
        if self._transaction_pool is None:
            self._transaction_pool = connections.pool(self.conninfo, connections.TRANSACTIONS)
        return self._transaction_pool

    @property
    def step_pool(self) -> ConnectionPool[Connection[Any]]:
        """Lends the holders' running steps their transactions (stores/postgres/steps.py)."""
        self._follow_clones()
        if self._step_pool is None:
            self._step_pool = connections.pool(self.conninfo, connections.STEPS)
        return self._step_pool

    def _follow_clones(self) -> None:
        """In a clone (fork, SnapStart restore) fetch the process's pools again: the old ones'
        connections belong to the parent. Pools given to the store are kept."""
        if self._generation == lifecycle.generation():
            return
        with _CLONE_LOCK:  # a batch's first records may all get here at once in a restored copy
            if self._generation == lifecycle.generation():
                return
            # A given pool that the layer closed before a snapshot (connections.pool's own).
            self._pool = None if _closed(self._given_pool) else self._given_pool
            self._transaction_pool = (
                None if _closed(self._given_transaction_pool) else self._given_transaction_pool
            )
            self._step_pool = None if _closed(self._given_step_pool) else self._given_step_pool
            # The parent's holders' transactions are not ours to end: forget them.
            self._open = {}
            self._open_lock = threading.Lock()
            self._generation = lifecycle.generation()  # last: the unlocked check reads it

    def _at(self) -> int | None:
        """The `at_ms` every statement binds: the given clock's reading, or None (the
        server's clock, clock.NOW_MS)."""
        return None if self._clock is None else int(self._clock() * 1000)

    def _run(self, statement: Callable[[Connection[Any]], T]) -> T:
        """`statement` on a pooled connection, tried again when the connection broke.

        Every statement here is fenced or recognises its own earlier attempt, so running one
        again after a lost reply is safe; errors that are not the connection's surface at once.
        """
        import psycopg

        for attempt in range(1, ATTEMPTS + 1):
            try:
                with self.pool.connection() as conn:
                    return statement(conn)
            except psycopg.OperationalError as exc:
                if attempt == ATTEMPTS or not _reconnect_helps(exc):
                    raise
                time.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")  # the loop returns or raises

    @staticmethod
    def _rows(conn: Connection[Any], sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        from psycopg.rows import dict_row

        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(sql.encode(), params)  # composed from constants, values bound
            return cur.fetchall() if cur.description else []

    # -- one record ----------------------------------------------------------------------------

    def get(self, scope: str, key: str) -> StoredRecord | None:
        """The live record, or None when absent or expired (cleanup deletes expired rows)."""
        return self.get_by_id(db_id(scope, key))

    def get_by_id(self, record_id: str) -> StoredRecord | None:
        read = self._read(record_id)
        return None if read is None else read[0]

    def _read(self, record_id: str) -> tuple[StoredRecord, int] | None:
        """The live record and the clock reading it was judged live by; None when absent or
        expired."""
        sql = statements.READ
        params = {"id": record_id, "at_ms": self._at()}
        rows = self._run(lambda conn: self._rows(conn, sql, params))
        if not rows:
            return None
        record, now_ms = record_from_row(rows[0]), int(rows[0]["now_ms"])
        return None if record.is_expired(now_ms / 1000) else (record, now_ms)

    def _failure_params(self, error: ErrorInfo) -> dict[str, Any]:
        """The bound values of statements.MARK_FAILED (a failure, or a blocked takeover)."""
        return {
            "etype": sanitise(error.type[:256]),
            "emsg": sanitise(error.message[: ErrorInfo.MAX_MESSAGE]),
            "eretry": error.retryable,
            "failed_ttl_s": self.failed_ttl_s,
        }


def _closed(pool: ConnectionPool[Connection[Any]] | None) -> bool:
    return pool is not None and pool.closed


_CLONE_LOCK = threading.Lock()


def _new_clone_lock() -> None:
    global _CLONE_LOCK
    _CLONE_LOCK = threading.Lock()


lifecycle.on_clone(_new_clone_lock)
