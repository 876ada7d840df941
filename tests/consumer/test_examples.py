"""The example consumers as deployed: env configuration, lazy clients, the effect ledger."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, Outcome
from tests.consumer.conftest import Queues, drain, event, lambda_context, sqs_record

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
    queues: Queues,
) -> Queues:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", moto_endpoint)
    monkeypatch.setenv("IDEMPOTENCY_TABLE", idempotency_table)
    monkeypatch.setenv("LEDGER_TABLE", ledger_table)
    monkeypatch.setenv("CONSUMER_SCOPE", scope)
    monkeypatch.setenv("DEAD_LETTER_QUEUE_URL", queues.dlq_url)
    return queues


def ledger(ddb: DynamoDBClient, table: str) -> list[dict[str, Any]]:
    return [dict(i) for i in ddb.scan(TableName=table)["Items"]]


def test_orders_records_each_order_once(
    deployed_env: Queues, ddb: DynamoDBClient, ledger_table: str, sqs: SQSClient, scope: str
) -> None:
    from functions.orders.handler import handle

    bodies = [{"orderId": f"o-{n % 6}", "amount": n % 6} for n in range(10)]
    bodies.append({"orderId": "o-bad", "amount": -1})
    records = [sqs_record(b) for b in bodies]
    handle(event(*records), lambda_context())
    # in-progress losers of the same batch come back, as SQS would redeliver them
    for _ in range(3):
        failed = {r.message_id for r in handle.last_results if r.report_failure}
        if not failed:
            break
        handle(event(*[r for r in records if r["messageId"] in failed]), lambda_context())

    entries = ledger(ddb, ledger_table)
    assert Counter(e["pk"]["S"] for e in entries) == {f"o-{n}": 1 for n in range(6)}
    # an execution log: one entry per execution, each with an id of its own
    assert all(e["sk"]["S"].startswith(f"{scope}#effect#") for e in entries)
    assert len({e["sk"]["S"] for e in entries}) == 6
    [dead] = drain(sqs, deployed_env.dlq_url)
    assert json.loads(dead["Body"]) == {"orderId": "o-bad", "amount": -1}
    assert dead["MessageAttributes"]["eo-error-type"]["StringValue"] == "PermanentError"


def test_orders_transient_failure_succeeds_on_retry_with_a_new_fence(
    deployed_env: Queues, ddb: DynamoDBClient, ledger_table: str, idempotency_table: str, scope: str
) -> None:
    from functions.orders.handler import handle

    record = sqs_record({"orderId": "o-retry", "amount": 3, "failTimes": 1})
    first = handle(event(record), lambda_context())
    assert first == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert handle(event(record), lambda_context()) == {"batchItemFailures": []}
    [entry] = ledger(ddb, ledger_table)
    stored = IdempotencyStore(idempotency_table, client=ddb).get(scope, "o-retry")
    assert stored is not None
    assert stored.attempts == 2
    assert entry["fence"]["N"] == str(stored.fence)  # written by the second holder


def test_payments_run_in_order_per_account_and_never_repeat(
    deployed_env: Queues, ddb: DynamoDBClient, ledger_table: str
) -> None:
    from functions.payments.handler import handle

    arn = "arn:aws:sqs:us-east-1:123456789012:payments.fifo"
    records = [
        sqs_record(
            {"paymentId": f"p-{n}", "accountId": f"acct-{n % 2}", "amount": "10.50"},
            arn=arn,
            group_id=f"acct-{n % 2}",
        )
        for n in range(6)
    ]
    assert handle(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert handle(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert [r.outcome for r in handle.last_results] == [Outcome.DUPLICATE] * 6
    entries = ledger(ddb, ledger_table)
    assert sorted(e["pk"]["S"] for e in entries) == [f"p-{n}" for n in range(6)]
    detail = json.loads(entries[0]["detail"]["S"])
    assert detail["amount"] == "10.50"


def test_payments_block_takeover_of_an_expired_lock(
    deployed_env: Queues, ddb: DynamoDBClient, idempotency_table: str, scope: str
) -> None:
    from exactly_once import IdempotencyStore
    from functions.payments.handler import handle

    IdempotencyStore(idempotency_table, client=ddb).acquire(
        scope, "p-dead", lease_ms=-1, owner="crashed:req"
    )
    arn = "arn:aws:sqs:us-east-1:123456789012:payments.fifo"
    record = sqs_record(
        {"paymentId": "p-dead", "accountId": "a", "amount": "1"}, arn=arn, group_id="a"
    )
    assert handle(event(record), lambda_context()) == {"batchItemFailures": []}
    assert [r.outcome for r in handle.last_results] == [Outcome.PERMANENT]
    assert handle.last_results[0].reason is not None
    assert handle.last_results[0].reason.startswith("LeaseExpired")
