"""Fixtures for `once`: the store on the session's DynamoDB Local table, on a fake clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Claim, IdempotencyStore, OnceBlock
from exactly_once.stores import schema
from tests.conftest import FakeClock

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# What `begin` reads from the environment: a developer's shell must not change the tests.
SETTINGS = (
    "IDEMPOTENCY_TABLE",
    "LEASE_MARGIN_MS",
    "LEASE_MAX_MS",
    "BLOCK_EXPIRED_LEASES",
    "RECORD_TTL_SECONDS",
    "FAILED_TTL_SECONDS",
)
MARGIN_MS = 5_000  # LeasePolicy's default margin


@pytest.fixture(autouse=True)
def _no_settings_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(ddb: DynamoDBClient, idempotency_table: str, clock: FakeClock) -> IdempotencyStore:
    """The session table, on the test's clock (leases expire when the test says)."""
    return IdempotencyStore(idempotency_table, client=ddb, clock=clock)


def raw_item(store: IdempotencyStore, scope: str, key: str) -> dict[str, Any]:
    """The record as DynamoDB holds it, read consistently."""
    got = store.client.get_item(
        TableName=store.table_name,
        Key={schema.PARTITION_KEY: {"S": schema.record_id(scope, key)}},
        ConsistentRead=True,
    )
    return dict(got.get("Item", {}))


def run(block: OnceBlock, body: Callable[[Claim], object]) -> Claim:
    """`with block as claim: body(claim)`, as one call that `pytest.raises` can wrap."""
    with block as claim:
        body(claim)
    return claim


def raising(exc: BaseException) -> Callable[[Claim], object]:
    """A block body that raises `exc` (after checking it holds the lock)."""

    def body(claim: Claim) -> None:
        assert claim.acquired
        raise exc

    return body
