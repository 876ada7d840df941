"""The completion in the holder's transaction sets the store's statement_timeout for itself
(`SET LOCAL`, statements.COMPLETE_AND_COMMIT). Whatever happens to it, the lent connection goes
back to its pool clean: no transaction left open, and the lent connections' own
statement_timeout (the database's) for the next holder, not the store's bound."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from exactly_once import CommitFailed, ConfigurationError, Status
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.store import PostgresStore
from tests.conftest import FakeClock
from tests.stores.pg_support import insert_entry, ledger_rows

STORE_TIMEOUT_MS = 4321  # the store's bound, recognisable in SHOW


@pytest.fixture
def pools(pg_dsn: str) -> Iterator[tuple[ConnectionPool[Any], ConnectionPool[Any]]]:
    """The store's two pools, of its own; one lent connection, so the next holder gets the
    connection the last one gave back."""
    statements = connections.new_pool(pg_dsn, connections.STATEMENTS)
    lent = ConnectionPool(
        pg_dsn,
        connection_class=connections.HolderConnection,
        kwargs=connections._connect_kwargs(pg_dsn, connections.TRANSACTIONS),
        min_size=0,
        max_size=1,
        timeout=5.0,
        open=True,
    )
    yield statements, lent
    statements.close()
    lent.close()


def _out_of_pool(pool: ConnectionPool[Any]) -> int:
    stats = pool.get_stats()
    return int(stats["pool_size"]) - int(stats["pool_available"])


def _lent_timeout(store: PostgresStore, scope: str) -> tuple[int, str]:
    """(backend pid, statement_timeout) that the next holder's transaction runs under."""
    got = store.acquire(scope, f"probe-{uuid.uuid4().hex[:8]}", lease_ms=30_000, owner="p")
    assert got.lock is not None
    pid, timeout = _session(store.transaction(got.lock))
    assert store.complete(got.lock).ok
    return pid, timeout


def _session(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    row = conn.execute("SELECT pg_backend_pid(), current_setting('statement_timeout')").fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


@pytest.mark.parametrize("ending", ["committed", "fence refused"])
def test_the_completions_bound_does_not_outlive_it(
    pg_dsn: str,
    scope: str,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    pools: tuple[ConnectionPool[Any], ConnectionPool[Any]],
    ending: str,
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_PG_STATEMENT_TIMEOUT_MS", str(STORE_TIMEOUT_MS))
    store = PostgresStore(pg_dsn, clock=clock, pool=pools[0], transaction_pool=pools[1])
    key = f"k-{uuid.uuid4().hex[:8]}"
    got = store.acquire(scope, key, lease_ms=1_000, owner="old")
    assert got.lock is not None
    conn = store.transaction(got.lock)
    pid, default = _session(conn)
    assert default != f"{STORE_TIMEOUT_MS}ms"
    insert_entry(conn, key, got.lock.fence)
    if ending == "fence refused":
        clock.advance(2)
        assert store.acquire(scope, key, lease_ms=30_000, owner="new").acquired
        assert not store.complete(got.lock, "r").ok
        assert ledger_rows(pg_dsn, key) == []
    else:
        assert store.complete(got.lock, "r").ok
        assert len(ledger_rows(pg_dsn, key)) == 1
    assert _out_of_pool(pools[1]) == 0
    assert _lent_timeout(store, scope) == (pid, default)


def test_a_completion_that_cannot_read_its_bound_gives_its_connection_back(
    pg_dsn: str,
    scope: str,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    pools: tuple[ConnectionPool[Any], ConnectionPool[Any]],
) -> None:
    """Behind RDS Proxy (IDEMPOTENCY_PG_SESSION_SETTINGS=server) the store's settings are first
    read by the completion: a malformed one must not leak the holder's open transaction."""
    monkeypatch.setenv("IDEMPOTENCY_PG_SESSION_SETTINGS", "server")
    monkeypatch.setenv("IDEMPOTENCY_PG_STATEMENT_TIMEOUT_MS", "10s")  # not an integer
    store = PostgresStore(pg_dsn, clock=clock, pool=pools[0], transaction_pool=pools[1])
    key = f"k-{uuid.uuid4().hex[:8]}"
    got = store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert got.lock is not None
    insert_entry(store.transaction(got.lock), key, got.lock.fence)

    with pytest.raises(CommitFailed) as failed:
        store.complete(got.lock, "r")

    assert isinstance(failed.value.__cause__, ConfigurationError)
    assert _out_of_pool(pools[1]) == 0  # given back, rolled back
    assert store._open == {}
    assert ledger_rows(pg_dsn, key) == []
    record = store.get(scope, key)
    assert record is not None
    assert (record.status, record.lock_token) == (Status.IN_PROGRESS, got.lock.token)
    monkeypatch.delenv("IDEMPOTENCY_PG_STATEMENT_TIMEOUT_MS")
    # The pool's one connection serves the next holder (a leaked one would time out here).
    assert _lent_timeout(store, scope)[1] == "0"
    assert store.complete(got.lock, "r").ok
