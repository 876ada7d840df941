"""Heartbeat tests run on both stores, on the real clock: renewals happen in real time."""

from __future__ import annotations

import pytest

from exactly_once.stores.protocol import Store


@pytest.fixture(params=("dynamodb", "postgres"))
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def where(backend: str, request: pytest.FixtureRequest) -> str:
    """How a holder in another process reaches the same store (see holder.py)."""
    if backend == "dynamodb":
        local = request.getfixturevalue("dynamodb_local")
        return f"{local.endpoint}|{request.getfixturevalue('idempotency_table')}"
    return str(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def store(backend: str, request: pytest.FixtureRequest) -> Store:
    if backend == "dynamodb":
        from exactly_once.stores.dynamodb.store import IdempotencyStore

        ddb = request.getfixturevalue("ddb")
        return IdempotencyStore(request.getfixturevalue("idempotency_table"), client=ddb)
    from exactly_once.stores.postgres.store import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_dsn"))
