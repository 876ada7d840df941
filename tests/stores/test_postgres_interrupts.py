"""A BaseException (KeyboardInterrupt, SystemExit, a task's cancellation) at the driver's edge
while the PostgreSQL store holds a lent connection: the exception propagates, and the connection
goes back to its pool (rolled back, or discarded when it is mid-statement), never leaked."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from exactly_once import ErrorInfo, Status
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.records import Lock
from fault_injection.pg_faults import FaultyConnection, FaultyPool
from tests.conftest import FakeClock
from tests.stores.pg_support import insert_entry, ledger_rows


class Cancelled(BaseException):
    """Like asyncio.CancelledError or KeyboardInterrupt: not an Exception."""


class _InterruptedConnection(FaultyConnection):
    """`decide(kind)` says "before" (nothing sent) or "after" (the server ran it, the reply is
    never read) for a statement, and "before" for a rollback."""

    def _apply(self, kind: str, run: Callable[[], Any]) -> Any:
        when = self._pool.decide(kind)
        if when == "before":
            self._pool.count(kind, when)
            raise Cancelled(f"{kind}: interrupted before it was sent")
        result = run()
        if when == "after":
            self._pool.count(kind, when)
            raise Cancelled(f"{kind}: interrupted before its reply was read")
        return result

    def rollback(self) -> None:
        if self._pool.decide("rollback") == "before":
            self._pool.count("rollback", "before")
            raise Cancelled("rollback: interrupted")
        self._real.rollback()


class _InterruptingPool(FaultyPool):
    def getconn(self) -> _InterruptedConnection:
        return _InterruptedConnection(self.real.getconn(), self)


@pytest.fixture
def lent_pool(pg_dsn: str) -> Iterator[ConnectionPool[Any]]:
    """The store's transaction pool, of its own so that its counts are this test's alone."""
    pool = connections.new_pool(pg_dsn, connections.TRANSACTIONS)
    yield pool
    pool.close()


def _out_of_pool(pool: ConnectionPool[Any]) -> int:
    """Connections the pool manages that are not back in it (lent, or leaked)."""
    stats = pool.get_stats()
    assert stats.get("requests_waiting", 0) == 0
    return int(stats["pool_size"]) - int(stats["pool_available"])


def _store(
    pg_dsn: str, clock: FakeClock, pool: ConnectionPool[Any], plan: dict[str, str]
) -> tuple[PostgresStore, FaultyPool]:
    interrupting = _InterruptingPool(pool, lambda kind: plan.pop(kind, None))
    pools: dict[str, Any] = {"transaction_pool": interrupting}  # a stand-in for the real pool
    return PostgresStore(pg_dsn, clock=clock, **pools), interrupting


@dataclass
class _Holding:
    """A holder of a fresh key, its business transaction open (a ledger row inserted, on the
    connection lent to it); `plan` maps a statement kind to when to interrupt it."""

    store: PostgresStore
    faults: FaultyPool
    plan: dict[str, str]
    key: str
    lock: Lock


def _holding(pg_dsn: str, scope: str, clock: FakeClock, pool: ConnectionPool[Any]) -> _Holding:
    plan: dict[str, str] = {}
    store, faults = _store(pg_dsn, clock, pool, plan)
    key = f"k-{uuid.uuid4().hex[:8]}"
    got = store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert got.lock is not None
    insert_entry(store.transaction(got.lock), key, got.lock.fence)
    return _Holding(store, faults, plan, key, got.lock)


@pytest.mark.parametrize("when", ["before", "after"])
def test_an_interrupted_completion_gives_its_connection_back(
    pg_dsn: str, scope: str, clock: FakeClock, lent_pool: ConnectionPool[Any], when: str
) -> None:
    held = _holding(pg_dsn, scope, clock, lent_pool)
    store, key = held.store, held.key
    assert _out_of_pool(lent_pool) == 1  # lent to the holder
    held.plan["complete"] = when
    with pytest.raises(Cancelled):
        store.complete(held.lock, "r")
    assert held.faults.injected == {("complete", when): 1}
    assert _out_of_pool(lent_pool) == 0
    assert store._open == {}
    record = store.get(scope, key)
    assert record is not None
    if when == "before":  # never sent: nothing committed, the key is still held
        assert record.status is Status.IN_PROGRESS
        assert ledger_rows(pg_dsn, key) == []
        assert store.complete(held.lock, "r").ok  # without the transaction, which rolled back
    else:  # the server committed it; only the reply was lost to the interruption
        assert record.status is Status.COMPLETED
        assert len(ledger_rows(pg_dsn, key)) == 1


def test_an_interrupted_begin_gives_its_connection_back(
    pg_dsn: str, scope: str, clock: FakeClock, lent_pool: ConnectionPool[Any]
) -> None:
    store, faults = _store(pg_dsn, clock, lent_pool, {"business": "after"})  # BEGIN
    got = store.acquire(scope, f"k-{uuid.uuid4().hex[:8]}", lease_ms=30_000, owner="o")
    assert got.lock is not None
    with pytest.raises(Cancelled):
        store.transaction(got.lock)
    assert faults.injected == {("business", "after"): 1}
    assert _out_of_pool(lent_pool) == 0
    assert store._open == {}


@pytest.mark.parametrize("end", ["fail", "discard"])
def test_an_interrupted_rollback_gives_its_connection_back(
    pg_dsn: str, scope: str, clock: FakeClock, lent_pool: ConnectionPool[Any], end: str
) -> None:
    held = _holding(pg_dsn, scope, clock, lent_pool)
    store, lock = held.store, held.lock
    ending: Callable[[], object] = {
        "fail": lambda: store.fail(lock, ErrorInfo("X", "x", retryable=True)),
        "discard": lambda: store.discard(lock),
    }[end]
    held.plan["rollback"] = "before"
    with pytest.raises(Cancelled):
        ending()
    assert held.faults.injected == {("rollback", "before"): 1}
    assert _out_of_pool(lent_pool) == 0  # the pool rolled it back on its return
    assert store._open == {}
    assert ledger_rows(pg_dsn, held.key) == []
