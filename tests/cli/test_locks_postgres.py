"""`locks --dsn`: the same listing, record and reset on the PostgreSQL store."""

from __future__ import annotations

import json

import pytest

from exactly_once import ErrorInfo
from exactly_once.stores.postgres.migrations import migrate
from exactly_once.stores.postgres.store import PostgresStore
from tests.cli.support import Invoke


@pytest.fixture
def store(new_database: str) -> PostgresStore:
    migrate(new_database)
    return PostgresStore(new_database)


def failed(store: PostgresStore, key: str) -> None:
    lock = store.acquire("orders", key, lease_ms=60_000, owner="worker:req-1").lock
    assert lock is not None
    assert store.fail(lock, ErrorInfo("PermanentError", "bad data", retryable=False)).ok


def test_locks_list_with_a_dsn_lists_a_failed_record(cli: Invoke, store: PostgresStore) -> None:
    failed(store, "failed-1")
    assert store.acquire("orders", "done-1", lease_ms=60_000, owner="x:y").acquired

    result = cli("locks", "list", "--status", "failed", "--dsn", store.conninfo)

    assert result.exit_code == 0, result.output
    assert "orders#failed-1" in result.output
    assert "PermanentError: bad data (permanent)" in result.output
    assert "worker:req-1" in result.output
    assert "done-1" not in result.output  # IN_PROGRESS, not FAILED
    assert f"1 record(s) in {store.name}" in result.output


def test_locks_show_and_reset_with_a_dsn(cli: Invoke, store: PostgresStore) -> None:
    failed(store, "failed-2")
    shown = cli("locks", "show", "orders", "failed-2", "--dsn", store.conninfo)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["status"] == "FAILED"

    reset = cli("locks", "reset", "orders", "failed-2", "--dsn", store.conninfo)
    assert reset.exit_code == 0, reset.output
    assert store.acquire("orders", "failed-2", lease_ms=1_000, owner="x:z").acquired
