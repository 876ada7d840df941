"""The ledger's entries carry the table's TTL attribute: LEDGER_RETENTION_DAYS after the write
(365 by default, 0 for none), so `record_effect`'s once-guarantee lasts as long as that."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, begin
from exactly_once.ledger import (
    DEFAULT_RETENTION_DAYS,
    RETENTION_VARIABLE,
    TTL_ATTRIBUTE,
    append_entry,
    record_effect,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

DAY_S = 86_400


NOW = 1_800_000_000  # the ledger's clock in these tests: its expiry is exact, not a window


def stored(ddb: DynamoDBClient, table: str, key: str) -> dict[str, Any]:
    response = ddb.query(
        TableName=table,
        KeyConditionExpression="pk = :k",
        ExpressionAttributeValues={":k": {"S": key}},
    )
    (item,) = response["Items"]
    return dict(item)


def effect(store: IdempotencyStore, scope: str, key: str, ledger_table: str) -> None:
    claim = begin(scope, key, lease_s=30, store=store)
    assert record_effect(claim.lock, {"n": 1}, table=ledger_table) is not None
    claim.lock.succeed("done")


@pytest.mark.parametrize(("setting", "days"), [(None, DEFAULT_RETENTION_DAYS), ("30", 30)])
def test_record_effect_writes_the_expiry(
    store: IdempotencyStore,
    ddb: DynamoDBClient,
    ledger_table: str,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
    setting: str | None,
    days: int,
) -> None:
    if setting is None:
        monkeypatch.delenv(RETENTION_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(RETENTION_VARIABLE, setting)
    monkeypatch.setattr("exactly_once.ledger.time", SimpleNamespace(time=lambda: NOW))
    effect(store, scope, "k-ttl", ledger_table)
    expires = int(stored(ddb, ledger_table, "k-ttl")[TTL_ATTRIBUTE]["N"])
    assert expires == NOW + days * DAY_S
    assert DEFAULT_RETENTION_DAYS == 365


@pytest.fixture
def layer_on_dynamodb_local(dynamodb_local: DynamoDBLocal, monkeypatch: pytest.MonkeyPatch) -> None:
    """`append_entry` uses the layer's own client, which follows AWS_ENDPOINT_URL_DYNAMODB."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)


@pytest.mark.usefixtures("layer_on_dynamodb_local")
def test_append_entry_writes_it_too_and_zero_keeps_entries_forever(
    ddb: DynamoDBClient, ledger_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RETENTION_VARIABLE, "7")
    monkeypatch.setattr("exactly_once.ledger.time", SimpleNamespace(time=lambda: NOW))
    append_entry("k-append", 1, "m-1", {"n": 1}, table=ledger_table)
    assert int(stored(ddb, ledger_table, "k-append")[TTL_ATTRIBUTE]["N"]) == NOW + 7 * DAY_S
    monkeypatch.setenv(RETENTION_VARIABLE, "0")
    append_entry("k-forever", 1, "m-2", {"n": 1}, table=ledger_table)
    assert TTL_ATTRIBUTE not in stored(ddb, ledger_table, "k-forever")


@pytest.mark.parametrize("value", ["a year", "-1"])
def test_a_malformed_retention_is_refused(
    ledger_table: str, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(RETENTION_VARIABLE, value)
    with pytest.raises(ValueError, match=RETENTION_VARIABLE):
        append_entry("k-bad", 1, "m-3", {"n": 1}, table=ledger_table)
