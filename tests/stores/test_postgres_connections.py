"""How the PostgreSQL store connects: session settings, passwords it never keeps, and names."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from exactly_once import clients
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.session import init_query


def test_store_connections_run_with_the_store_timeouts(pg_dsn: str) -> None:
    with connections.connect(pg_dsn) as conn:
        shown = {
            name: conn.execute(f"SHOW {name}").fetchone()
            for name in ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")
        }
    assert shown == {
        "statement_timeout": ("10s",),
        "lock_timeout": ("2s",),
        "idle_in_transaction_session_timeout": ("1min",),
    }


def test_behind_a_proxy_the_server_sets_them_and_the_client_sends_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_PG_SESSION_SETTINGS", "server")
    assert "options" not in connections._connect_kwargs("host=db user=app")
    assert init_query().startswith("SET statement_timeout = 10000; ")


def test_an_iam_token_is_made_for_each_new_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[dict[str, Any]] = []

    class FakeRds:
        def generate_db_auth_token(self, **params: Any) -> str:
            asked.append(params)
            return f"token-{len(asked)}"

    monkeypatch.setenv("IDEMPOTENCY_DB_IAM_AUTH", "true")
    monkeypatch.setattr(clients, "rds", FakeRds)
    dsn = "host=proxy.example port=5432 dbname=exactly_once user=exactly_once sslmode=require"
    assert connections._connect_kwargs(dsn)["password"] == "token-1"
    assert connections._connect_kwargs(dsn)["password"] == "token-2"
    assert asked[0] == {
        "DBHostname": "proxy.example",
        "Port": 5432,
        "DBUsername": "exactly_once",
        "Region": "us-east-1",
    }


def test_a_store_is_named_without_its_password() -> None:
    name = connections.describe("postgresql://app:s3cret@db.example:6432/orders")
    assert name == "postgresql://db.example:6432/orders"
    assert "s3cret" not in name


def test_the_pool_is_one_per_dsn_and_opens_only_when_used(pg_dsn: str) -> None:
    dsn = pg_dsn + " application_name=pool-test"
    first = connections.pool(dsn)
    assert connections.pool(dsn) is first
    with first.connection() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.autocommit
    assert isinstance(conn, psycopg.Connection)
