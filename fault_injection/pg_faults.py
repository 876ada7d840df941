"""Faults for the PostgreSQL store, at the driver's edge: what botocore's event hooks are for
the DynamoDB store.

`FaultyPool` wraps the store's psycopg pool. Before each statement or commit it asks `decide`
what happens to it:

- "lose": the server applies it, then the connection drops before the reply arrives (the
  caller sees OperationalError and cannot know it was applied: a lost reply);
- "fail": the connection drops before it is sent (nothing applied: the database unreachable).

The store is built with `PostgresStore(..., pool=FaultyPool(real_pool, decide))`; nothing in the
library knows about it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

Decide = Callable[[str], str | None]  # statement kind -> "lose", "fail" or None
OnFault = Callable[[str, str], None]  # (statement kind, fault), once a fault was applied
KINDS = ("acquire", "write", "read", "complete", "commit", "step", "business")


def kind_of(sql: Any) -> str:
    """Which of the store's statements this is (the business function's are "business")."""
    text = sql.decode() if isinstance(sql, bytes) else str(sql)
    head = text.lstrip()
    if "UPDATE exactly_once.records SET steps" in head:
        return "step"  # a step's recovery point, sent with its COMMIT (and its BEGIN, if empty)
    if head.startswith("SET LOCAL statement_timeout"):  # the completion's own bound, then it
        head = head.split(";", 1)[-1].lstrip()
    if head.startswith("WITH acquired"):
        return "acquire"
    if head.startswith(("WITH written", "UPDATE exactly_once.records SET status = 'FAILED'")):
        return "write"
    if head.startswith("WITH done AS (UPDATE exactly_once.records SET status = 'COMPLETED'"):
        return "complete"  # in the holder's transaction, with its COMMIT
    if head.startswith("SELECT") and "exactly_once.records" in head:
        return "read"
    return "business"


class _Dropped(psycopg.OperationalError):
    """The connection dropped (injected)."""


class FaultyConnection:
    """A psycopg connection whose statements and commits meet the pool's faults."""

    def __init__(self, real: psycopg.Connection[Any], pool: FaultyPool) -> None:
        self._real = real
        self._pool = pool

    @property
    def autocommit(self) -> bool:
        return self._real.autocommit

    @autocommit.setter
    def autocommit(self, value: bool) -> None:
        self._real.autocommit = value

    def _apply(self, kind: str, run: Callable[[], Any]) -> Any:
        fault = self._pool.decide(kind)
        if fault == "fail":
            self._pool.count(kind, fault)
            self._real.close()  # the pool discards it when it comes back
            raise _Dropped(f"connection dropped before {kind} (injected)")
        result = run()
        if fault == "lose":
            self._pool.count(kind, fault)
            self._real.close()
            raise _Dropped(f"connection dropped after {kind}, reply lost (injected)")
        return result

    def execute(self, sql: Any, params: Any = None) -> Any:
        return self._apply(kind_of(sql), lambda: self._real.execute(sql, params))

    def cursor(self, **kwargs: Any) -> _FaultyCursor:
        return _FaultyCursor(self._real.cursor(**kwargs), self)

    def commit(self) -> None:
        self._apply("commit", self._real.commit)

    def rollback(self) -> None:
        self._real.rollback()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class _FaultyCursor:
    def __init__(self, real: Any, conn: FaultyConnection) -> None:
        self._real = real
        self._conn = conn

    def __enter__(self) -> _FaultyCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._real.close()

    def execute(self, sql: Any, params: Any = None) -> _FaultyCursor:
        self._conn._apply(kind_of(sql), lambda: self._real.execute(sql, params))
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class FaultyPool:
    """The store's pool, with `decide` consulted before every statement and commit.

    `on_fault` hears of each fault once it is applied: a chaos worker logs it to its event
    file, because `injected` dies with a killed process.
    """

    def __init__(self, real: Any, decide: Decide, on_fault: OnFault | None = None) -> None:
        self.real = real
        self.decide = decide
        self.on_fault = on_fault
        self.injected: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._wrapped: dict[int, FaultyConnection] = {}

    def count(self, kind: str, fault: str) -> None:
        with self._lock:
            self.injected[(kind, fault)] = self.injected.get((kind, fault), 0) + 1
        if self.on_fault is not None:
            self.on_fault(kind, fault)

    @contextmanager
    def connection(self) -> Iterator[FaultyConnection]:
        with self.real.connection() as conn:
            yield FaultyConnection(conn, self)

    def getconn(self) -> FaultyConnection:
        return FaultyConnection(self.real.getconn(), self)

    def putconn(self, conn: FaultyConnection) -> None:
        self.real.putconn(conn._real)

    def sibling(self, real: Any) -> FaultyPool:
        """The same faults, and the same counts, on another pool (the store has two: its
        statements', and the one that lends the holders their transactions)."""
        other = FaultyPool(real, self.decide, self.on_fault)
        other.injected, other._lock = self.injected, self._lock
        return other


def faulty_store_pools(
    conninfo: str, decide: Decide, on_fault: OnFault | None = None
) -> dict[str, Any]:
    """`pool=`, `transaction_pool=` and `step_pool=` for a PostgresStore whose pools all meet
    the faults (a step's commit runs on the steps' own pool); the first is the one to read
    `injected` from."""
    from exactly_once.stores.postgres import connections

    statements = FaultyPool(connections.pool(conninfo, connections.STATEMENTS), decide, on_fault)
    return {
        "pool": statements,
        "transaction_pool": statements.sibling(
            connections.pool(conninfo, connections.TRANSACTIONS)
        ),
        "step_pool": statements.sibling(connections.pool(conninfo, connections.STEPS)),
    }
