"""Every test here runs on both stores: DynamoDB Local and a real PostgreSQL server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from exactly_once.stores.protocol import Store
from tests.conftest import FakeClock

BACKENDS = ("dynamodb", "postgres")
StoreFactory = Callable[..., Store]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(backend: str, request: pytest.FixtureRequest, clock: FakeClock) -> StoreFactory:
    """A store on the backend, on the test's clock; keyword arguments go to its constructor."""
    if backend == "dynamodb":
        from exactly_once.stores.dynamodb.store import IdempotencyStore

        ddb = request.getfixturevalue("ddb")
        table = request.getfixturevalue("idempotency_table")

        def dynamodb(**kwargs: Any) -> Store:
            kwargs.setdefault("clock", clock)
            return IdempotencyStore(table, client=ddb, **kwargs)

        return dynamodb
    from exactly_once.stores.postgres.store import PostgresStore

    dsn = request.getfixturevalue("pg_dsn")

    def postgres(**kwargs: Any) -> Store:
        kwargs.setdefault("clock", clock)
        return PostgresStore(dsn, **kwargs)

    return postgres


@pytest.fixture
def store(make_store: StoreFactory) -> Store:
    return make_store()


@pytest.fixture
def sweep(backend: str, request: pytest.FixtureRequest, clock: FakeClock) -> Callable[[str], None]:
    """Delete a record whose expiry passed, as each backend's own mechanism does: DynamoDB's
    TTL sweep (a DeleteItem here), PostgreSQL's cleanup job."""
    if backend == "dynamodb":
        ddb = request.getfixturevalue("ddb")
        table = request.getfixturevalue("idempotency_table")

        def ttl(record_id: str) -> None:
            ddb.delete_item(TableName=table, Key={"id": {"S": record_id}})

        return ttl
    from exactly_once.stores.postgres.cleanup import delete_expired

    dsn = request.getfixturevalue("pg_dsn")

    def cleanup(record_id: str) -> None:
        delete_expired(dsn, now_s=clock())

    return cleanup
