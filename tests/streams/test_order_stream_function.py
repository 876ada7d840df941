"""functions/order_stream as deployed (the repo stack's Kinesis consumer): configured from the
environment the construct sets, one ledger entry per order, poison to the DLQ with its reason,
and a transient failure retried from the failed record on, as Lambda's mapping retries."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Outcome
from tests.consumer.conftest import lambda_context
from tests.streams.conftest import dead_letters, reason_of
from tests.streams.stream_events import kinesis_record, records_event

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from local_aws.dynamodb_local import DynamoDBLocal


@pytest.fixture
def deployed_env(
    monkeypatch: pytest.MonkeyPatch,
    dynamodb_local: DynamoDBLocal,
    moto_endpoint: str,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
    dlq_url: str,
) -> str:
    """The variables `KinesisStreamConsumer` gives the function (the store's, the ledger's,
    CONSUMER_SCOPE, DEAD_LETTER_QUEUE_URL), against DynamoDB Local and moto's SQS."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", moto_endpoint)
    monkeypatch.setenv("IDEMPOTENCY_TABLE", idempotency_table)
    monkeypatch.setenv("LEDGER_TABLE", ledger_table)
    monkeypatch.setenv("CONSUMER_SCOPE", scope)
    monkeypatch.setenv("DEAD_LETTER_QUEUE_URL", dlq_url)
    return dlq_url


def ledger(ddb: DynamoDBClient, table: str) -> list[dict[str, Any]]:
    return [dict(i) for i in ddb.scan(TableName=table)["Items"]]


def redeliver(records: list[dict[str, Any]], response: dict[str, Any]) -> list[dict[str, Any]]:
    """What a Kinesis mapping sends next: the shard again from the reported sequence number."""
    failures = response["batchItemFailures"]
    if not failures:
        return []
    [failed] = failures
    sequences = [r["kinesis"]["sequenceNumber"] for r in records]
    return records[sequences.index(failed["itemIdentifier"]) :]


def test_each_order_once_in_the_ledger_and_poison_dead_lettered(
    deployed_env: str, ddb: DynamoDBClient, ledger_table: str, sqs: SQSClient, scope: str
) -> None:
    from functions.order_stream.handler import handle

    # A producer's retries put the same order twice (same data: a different one would be a
    # fingerprint mismatch, dead-lettered).
    payloads: list[dict[str, Any]] = [{"orderId": f"o-{n % 4}", "amount": n % 4} for n in range(8)]
    payloads.insert(3, {"orderId": "o-bad", "amount": -1})
    records = [kinesis_record(p, n) for n, p in enumerate(payloads)]
    pending, outcomes = records, Counter[Outcome]()
    for _ in range(len(records) + 1):  # bounded: one record at most per round is retried
        if not pending:
            break
        pending = redeliver(pending, handle(records_event(*pending), lambda_context()))
        outcomes.update(r.outcome for r in handle.last_results)
    assert pending == []

    entries = ledger(ddb, ledger_table)
    # The first record of each key ran; the later ones with the same key were done already.
    assert outcomes[Outcome.DUPLICATE] == 4
    assert Counter(e["pk"]["S"] for e in entries) == {f"o-{n}": 1 for n in range(4)}
    assert all(e["sk"]["S"].startswith(f"{scope}#effect#") for e in entries)
    [dead] = dead_letters(sqs, deployed_env)
    assert json.loads(dead["body"]) == {"orderId": "o-bad", "amount": -1}
    assert reason_of(dead).startswith("PermanentError: amount must be a non-negative number")


def test_transient_failure_is_reported_then_runs_once(
    deployed_env: str, ddb: DynamoDBClient, ledger_table: str
) -> None:
    from functions.order_stream.handler import handle

    records = [
        kinesis_record({"orderId": "o-retry", "amount": 3, "failTimes": 1}, 0),
        kinesis_record({"orderId": "o-after", "amount": 4}, 1),
    ]
    first = handle(records_event(*records), lambda_context())
    # The failure stops its shard: the later record is not run, and the mapping resends both.
    assert first == {
        "batchItemFailures": [{"itemIdentifier": records[0]["kinesis"]["sequenceNumber"]}]
    }
    assert ledger(ddb, ledger_table) == []
    assert handle(records_event(*records), lambda_context()) == {"batchItemFailures": []}
    details = {e["pk"]["S"]: json.loads(e["detail"]["S"]) for e in ledger(ddb, ledger_table)}
    assert {key: (d["kind"], d["amount"]) for key, d in details.items()} == {
        "o-retry": ("order-stream", 3),
        "o-after": ("order-stream", 4),
    }
    assert details["o-retry"]["execution"]["attempt"] == 2
