"""The store's statement_timeout bounds the store's own statements, not the holder's business
statements in `ctx.transaction`: those run under the database's own setting, whether the store
sends its settings at connection start-up or a proxy's init query sets them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from exactly_once import CommitFailed, Status
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.session import init_query
from exactly_once.stores.postgres.store import PostgresStore
from tests.conftest import FakeClock
from tests.stores.pg_support import insert_entry, ledger_rows

STORE_TIMEOUT_MS = 200
LONGER_S = 1.0  # a business statement that outlasts the store's bound
PURPOSES = (connections.STATEMENTS, connections.TRANSACTIONS)  # pool=, transaction_pool=


def _proxied_pool(dsn: str, purpose: str) -> ConnectionPool[Any]:
    """A pool whose connections get the settings as RDS Proxy gives them: its init query, run
    on every new connection (IDEMPOTENCY_PG_SESSION_SETTINGS=server sends none itself)."""

    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute(init_query().encode())

    return ConnectionPool(
        dsn,
        connection_class=connections.HolderConnection,
        kwargs=connections._connect_kwargs(dsn, purpose),
        configure=configure,
        min_size=0,
        max_size=2,
        open=True,
    )


@pytest.fixture(params=["startup", "server"])
def bounded_store(
    request: pytest.FixtureRequest, pg_dsn: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PostgresStore]:
    """A store whose statement_timeout is short, on pools of its own (the process's pools may
    hold connections made with the default settings)."""
    monkeypatch.setenv("IDEMPOTENCY_PG_STATEMENT_TIMEOUT_MS", str(STORE_TIMEOUT_MS))
    # Long, so that a store statement waiting on a row lock is ended by the statement timeout.
    monkeypatch.setenv("IDEMPOTENCY_PG_LOCK_TIMEOUT_MS", "5000")
    monkeypatch.setenv("IDEMPOTENCY_PG_SESSION_SETTINGS", str(request.param))
    if request.param == "startup":
        pools = [connections.new_pool(pg_dsn, purpose) for purpose in PURPOSES]
    else:
        pools = [_proxied_pool(pg_dsn, purpose) for purpose in PURPOSES]
    yield PostgresStore(pg_dsn, clock=clock, pool=pools[0], transaction_pool=pools[1])
    for pool in pools:
        pool.close()


def _database_default(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SHOW statement_timeout").fetchone()
    assert row is not None
    return str(row[0])


def test_a_business_statement_may_outlast_the_stores_statement_timeout(
    bounded_store: PostgresStore, pg_dsn: str, scope: str
) -> None:
    key = f"k-{uuid.uuid4().hex[:8]}"
    got = bounded_store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert got.lock is not None
    conn = bounded_store.transaction(got.lock)
    shown = conn.execute("SHOW statement_timeout").fetchone()
    assert shown is not None
    assert shown[0] == _database_default(pg_dsn)
    idle = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()
    assert idle == ("1min",)  # a frozen holder's transaction still ends
    conn.execute("SELECT pg_sleep(%s)", (LONGER_S,))
    insert_entry(conn, key, got.lock.fence)
    assert bounded_store.complete(got.lock, "r").ok
    record = bounded_store.get(scope, key)
    assert record is not None
    assert record.status is Status.COMPLETED
    assert len(ledger_rows(pg_dsn, key)) == 1


def test_the_stores_own_statements_are_still_bounded(
    bounded_store: PostgresStore, pg_dsn: str, scope: str
) -> None:
    """A statement of the store's that waits on the record's row (held by another session) is
    cancelled by the store's statement_timeout: the acquire on its pool, and the completion in
    the holder's transaction, which then rolls back with the business write."""
    key = f"k-{uuid.uuid4().hex[:8]}"
    got = bounded_store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert got.lock is not None
    conn = bounded_store.transaction(got.lock)
    insert_entry(conn, key, got.lock.fence)
    with psycopg.connect(pg_dsn) as blocker:
        blocker.execute(
            "SELECT 1 FROM exactly_once.records WHERE id = %s FOR UPDATE", (f"{scope}#{key}",)
        )
        with pytest.raises(psycopg.errors.QueryCanceled):
            bounded_store.acquire(scope, key, lease_ms=30_000, owner="p")
        with pytest.raises(CommitFailed) as failed:
            bounded_store.complete(got.lock, "r")
        blocker.rollback()
    assert isinstance(failed.value.__cause__, psycopg.errors.QueryCanceled)
    assert ledger_rows(pg_dsn, key) == []
    record = bounded_store.get(scope, key)
    assert record is not None
    assert (record.status, record.lock_token) == (Status.IN_PROGRESS, got.lock.token)
