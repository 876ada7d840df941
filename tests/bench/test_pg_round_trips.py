"""The round-trip counter behind the store row (benchmarks/pg_proxy.py): what it counts on a real
connection, and the PostgreSQL store's acquire measured with it directly. Counts only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from benchmarks.pg_proxy import RoundTripProxy
from benchmarks.pg_wire import STARTUP, TERMINATE, statement_label
from exactly_once import AcquireStatus
from exactly_once.stores.postgres.store import PostgresStore


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[RoundTripProxy]:
    params = conninfo_to_dict(pg_dsn)
    with RoundTripProxy(str(params["host"]), int(str(params["port"]))) as running:
        yield running


@pytest.fixture
def dsn(proxy: RoundTripProxy, pg_dsn: str) -> str:
    params = conninfo_to_dict(pg_dsn)
    return proxy.dsn(str(params["dbname"]), str(params["user"]))


def test_statements_are_named_as_the_report_shows_them() -> None:
    assert statement_label("\nWITH acquired AS (\n  INSERT INTO exactly_once.records") == "acquire"
    assert statement_label("WITH written AS (UPDATE exactly_once.records SET") == "fenced write"
    completion = (
        "WITH done AS (UPDATE exactly_once.records SET status = 'COMPLETED', updated_at_ms = 1"
    )
    assert statement_label(completion) == "completion + COMMIT"
    assert statement_label("INSERT INTO exactly_once.ledger (pk) VALUES (1)") == "effect INSERT"
    assert statement_label("begin") == "BEGIN"


def test_each_flight_is_one_round_trip_named_by_its_statements(
    proxy: RoundTripProxy, dsn: str
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert proxy.counter.snapshot() == {STARTUP: 1}  # authentication: apart

        with proxy.counting() as counter:
            conn.execute("SELECT %s::int", (1,))
        assert counter.snapshot() == {"SELECT": 1}

        with proxy.counting() as counter:
            conn.autocommit = False
            conn.execute("SELECT 1")
            conn.execute("SELECT 2")
            conn.commit()
        assert counter.snapshot() == {"BEGIN": 1, "SELECT": 2, "COMMIT": 1}

        with proxy.counting() as counter:  # psycopg prepares a statement on its 5th run
            conn.autocommit = True
            for n in range(6):
                conn.execute("SELECT %s::bigint", (n,))
        assert counter.snapshot() == {"SELECT": 6, "prepare SELECT": 1}
        proxy.counter.reset()
    assert set(proxy.counter.snapshot()) <= {TERMINATE}  # no reply awaited: no round trip


def test_the_store_acquires_in_one_round_trip_a_new_key_and_a_duplicate(
    proxy: RoundTripProxy, dsn: str
) -> None:
    key = f"k-{uuid.uuid4().hex[:8]}"
    with ConnectionPool(dsn, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        pool.wait()
        store = PostgresStore(dsn, pool=pool)
        with proxy.counting() as counter:
            got = store.acquire("bench", key, lease_ms=30_000, owner="o")
        assert got.status is AcquireStatus.ACQUIRED
        assert counter.snapshot() == {"acquire": 1}

        assert got.lock is not None
        assert store.complete(got.lock, {"n": 1}).ok
        with proxy.counting() as counter:
            again = store.acquire("bench", key, lease_ms=30_000, owner="p")
        assert again.status is AcquireStatus.ALREADY_COMPLETED
        assert again.record is not None
        assert counter.snapshot() == {"acquire": 1}  # the refusing row came back with it
