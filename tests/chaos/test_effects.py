"""The chaos consumers' two ledger writes, in the two situations the chaos run produces.

A holder that stalls past its lease while another takes over (a zombie), and a holder that dies
between its effect and its completion: only the fenced write (the layer's `record_effect`)
keeps the ledger at one item per key in both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, RecordContext
from fault_injection.effects import LeaseLost, append_fenced, append_unfenced

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

EXPIRED = -1_000  # a lease that is already over: the next acquire takes the record over


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch, ledger_table: str, dynamodb_local: DynamoDBLocal) -> None:
    monkeypatch.setenv("LEDGER_TABLE", ledger_table)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)


def holder(store: IdempotencyStore, scope: str, key: str, lease_ms: int) -> RecordContext:
    acquired = store.acquire(scope, key, lease_ms=lease_ms, owner="test")
    assert acquired.lock is not None
    lock = acquired.lock
    return RecordContext(f"m-{lock.fence}", key, lock.fence, lock.attempt, {}, None, store, lock)


def ledger(ddb: DynamoDBClient, table: str, key: str) -> list[dict[str, Any]]:
    return ddb.query(
        TableName=table,
        KeyConditionExpression="pk = :k",
        ExpressionAttributeValues={":k": {"S": key}},
        ConsistentRead=True,
    )["Items"]


def test_a_zombie_is_refused_after_a_takeover(
    ddb: DynamoDBClient, store: IdempotencyStore, scope: str, ledger_table: str
) -> None:
    zombie = holder(store, scope, "z", EXPIRED)
    newer = holder(store, scope, "z", 60_000)
    assert append_fenced(newer, 5)["ledgerEntry"] is not None
    with pytest.raises(LeaseLost):
        append_fenced(zombie, 5)
    assert [i["fence"]["N"] for i in ledger(ddb, ledger_table, "z")] == [str(newer.fence)]


def test_a_takeover_after_a_crash_between_effect_and_completion_does_not_repeat_it(
    ddb: DynamoDBClient, store: IdempotencyStore, scope: str, ledger_table: str
) -> None:
    crashed = holder(store, scope, "c", EXPIRED)
    assert append_fenced(crashed, 5)["ledgerEntry"] is not None
    assert append_fenced(holder(store, scope, "c", 60_000), 5)["ledgerEntry"] is None
    assert len(ledger(ddb, ledger_table, "c")) == 1


def test_the_plain_write_doubles_in_both_situations(
    ddb: DynamoDBClient, store: IdempotencyStore, scope: str, ledger_table: str
) -> None:
    zombie = holder(store, scope, "p", EXPIRED)
    newer = holder(store, scope, "p", 60_000)
    append_unfenced("p", newer.fence, newer.message_id, 5)
    append_unfenced("p", zombie.fence, zombie.message_id, 5)
    assert len(ledger(ddb, ledger_table, "p")) == 2
