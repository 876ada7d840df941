"""Closing the books of a PostgreSQL run from the database: ledger rows per key, and the records
the store still lists as pending, in a database of the run's own (as the harness makes one)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from exactly_once import ErrorInfo, Status
from exactly_once.stores.postgres.store import PostgresStore
from fault_injection.accounting import KILLED, ZOMBIE, account
from fault_injection.run_stores import PostgresRunStore
from fault_injection.workload import Kind, Plan, PlannedMessage
from local_aws.postgres_server import PostgresServer

SENT = {0: "m0", 1: "m1", 2: "m2", 3: "m3", 4: "m4"}


@pytest.fixture
def run_store(postgres_server: PostgresServer) -> PostgresRunStore:
    return PostgresRunStore.create(postgres_server, f"chaos-books-{uuid.uuid4().hex[:6]}")


@pytest.fixture
def store(run_store: PostgresRunStore) -> Iterator[PostgresStore]:
    """A store on the run's database whose clock is an hour behind: its leases have ended."""
    with ConnectionPool(run_store.dsn, min_size=0, max_size=2, kwargs={"autocommit": True}) as pool:
        yield PostgresStore(run_store.dsn, clock=lambda: time.time() - 3600, pool=pool)


def plan() -> Plan:
    return Plan(
        messages=[
            PlannedMessage('{"orderId": "a"}', Kind.VALID, "a"),
            PlannedMessage('{"orderId": "b"}', Kind.VALID, "b"),
            PlannedMessage('{"orderId": "c"}', Kind.VALID, "c"),
            PlannedMessage('{"orderId": "a"}', Kind.DUPLICATE, "a"),
            PlannedMessage("not json", Kind.BAD_JSON),
        ],
        keys={"a", "b", "c"},
    )


def insert(dsn: str, key: str, fence: int, pid: int) -> None:
    detail: dict[str, Any] = {"kind": "order", "pid": pid}
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO exactly_once.ledger (pk, sk, fence, message_id, detail, written_at_ms) "
            "VALUES (%s, %s, %s, 'm', %s, 1)",
            (key, f"{fence:015d}#{uuid.uuid4().hex}", fence, json.dumps(detail)),
        )


def test_rows_per_key_make_doubles_and_missing_keys(run_store: PostgresRunStore) -> None:
    insert(run_store.dsn, "a", 1, pid=10)
    insert(run_store.dsn, "a", 2, pid=11)
    insert(run_store.dsn, "b", 1, pid=12)
    insert(run_store.dsn, "b", 3, pid=13)
    insert(run_store.dsn, "b", 4, pid=14)

    ledger = run_store.ledger()
    assert {key: [e.fence for e in entries] for key, entries in ledger.items()} == {
        "a": [1, 2],
        "b": [1, 3, 4],
    }
    assert [e.pid for e in ledger["a"]] == [10, 11]

    verdict = account(plan(), SENT, ledger, [], ([], []), 0, killed_pids={11}, paused_pids={14})
    assert verdict.doubles == {"a": 2, "b": 3}
    assert verdict.double_causes == {KILLED: 1, ZOMBIE: 1}
    assert verdict.missing == {"c"}
    assert verdict.lost == ["m2", "m4"]  # c's message, and the poison not in the DLQ
    assert verdict.exactly_once == 0
    assert not verdict.ok


def test_one_row_per_key_closes_the_books(run_store: PostgresRunStore) -> None:
    for key in ("a", "b", "c"):
        insert(run_store.dsn, key, 1, pid=1)

    verdict = account(plan(), SENT, run_store.ledger(), [], run_store.unfinished(), 0, set(), set())
    assert verdict.exactly_once == 3
    assert (verdict.doubles, verdict.missing) == ({}, set())
    assert verdict.lost == ["m4"]  # only the poison message, which no DLQ holds here


def test_stuck_and_retryable_records_are_read_from_the_store(
    run_store: PostgresRunStore, store: PostgresStore
) -> None:
    stuck = store.acquire("orders", "stuck", lease_ms=1_000, owner="w")
    retryable = store.acquire("orders", "retry", lease_ms=1_000, owner="w")
    permanent = store.acquire("orders", "poison", lease_ms=1_000, owner="w")
    done = store.acquire("orders", "done", lease_ms=1_000, owner="w")
    assert stuck.lock is not None
    assert retryable.lock is not None
    assert permanent.lock is not None
    assert done.lock is not None
    assert store.fail(retryable.lock, ErrorInfo("Boom", "boom", retryable=True)).ok
    assert store.fail(permanent.lock, ErrorInfo("Bad", "bad", retryable=False)).ok
    assert store.complete(done.lock, {"ok": True}).ok

    assert run_store.unfinished() == ([stuck.lock.record_id], [retryable.lock.record_id])
    record = store.get("orders", "poison")
    assert record is not None
    assert record.status is Status.FAILED


def test_raw_rows_of_a_key_are_dumped(run_store: PostgresRunStore, store: PostgresStore) -> None:
    insert(run_store.dsn, "k", 7, pid=1)
    store.acquire("orders", "k", lease_ms=1_000, owner="w")

    raw = run_store.raw("k")
    assert [row["fence"] for row in raw["ledger"]] == [7]
    assert [row["id"] for row in raw["records"]] == ["orders#k"]


def test_the_workers_select_the_run_database_and_no_table(run_store: PostgresRunStore) -> None:
    environment = run_store.environment({"IDEMPOTENCY_TABLE": "deployed", "OTHER": "x"})
    assert environment == {"IDEMPOTENCY_DSN": run_store.dsn, "OTHER": "x"}
