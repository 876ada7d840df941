"""The entry points hold a long invocation's key by a heartbeat lease (DynamoDB Local)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from exactly_once import LeasePolicy, NotificationContext, heartbeat, sns_subscriber
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.records import StoredRecord
from tests.sns.conftest import sns_event, sns_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class TenMinutesLeft:
    function_name = "subscriber"
    aws_request_id = "req"

    def get_remaining_time_in_millis(self) -> int:
        return 600_000


def run_subscriber(
    ddb: DynamoDBClient, table: str, scope: str, **kwargs: Any
) -> tuple[StoredRecord, int]:
    """Deliver one notification; what the record looked like inside the handler."""
    store = IdempotencyStore(table, client=ddb)
    seen: list[tuple[StoredRecord, int]] = []

    def handler(message: Any, ctx: NotificationContext) -> None:
        record = store.get(scope, message["orderId"])
        assert record is not None
        seen.append((record, int(time.time() * 1000)))

    subscriber = sns_subscriber(
        key="orderId", table_name=table, scope=scope, dynamodb_client=ddb, **kwargs
    )(handler)
    before = heartbeat.held()
    assert subscriber(sns_event(sns_record({"orderId": "o-1"})), TenMinutesLeft()) == {
        "processed": 1
    }
    assert heartbeat.held() == before  # the beat stopped with the outcome
    return seen[0]


def test_an_sns_subscriber_with_ten_minutes_holds_a_short_renewed_lease(
    ddb: DynamoDBClient, idempotency_table: str, scope: str
) -> None:
    record, at = run_subscriber(ddb, idempotency_table, scope)
    assert record.lease_expires_at_ms is not None
    assert record.expected_by_ms is not None
    assert record.lease_expires_at_ms <= at + 30_000  # the default heartbeat lease
    assert record.expected_by_ms >= at + 500_000  # the whole budget, for people and the queue


def test_a_lease_policy_without_heartbeat_keeps_the_long_lease(
    ddb: DynamoDBClient, idempotency_table: str, scope: str
) -> None:
    record, at = run_subscriber(ddb, idempotency_table, scope, lease=LeasePolicy(heartbeat_ms=None))
    assert record.lease_expires_at_ms is not None
    assert record.lease_expires_at_ms >= at + 500_000
