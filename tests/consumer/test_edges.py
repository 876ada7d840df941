"""The consumer at its edges: hostile input, awkward results, forged replays, BaseException.

Each test drives the decorated handler with real-shaped SQS records against DynamoDB Local
(and moto SQS for the DLQ), and checks that every record ends succeeded, reported failed, or in
the DLQ with its reason, and that no key's effect happens twice.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import time
from decimal import Decimal
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import (
    IdempotencyStore,
    Outcome,
    PermanentError,
    RecordContext,
    SqsConsumer,
    Status,
    held_lock,
)
from exactly_once import completion as completion_module
from exactly_once.ledger import record_effect
from exactly_once.stores import schema
from fault_injection.throttling import install_throttling
from local_aws.poller import to_lambda_record
from tests.conftest import make_ddb_client
from tests.consumer.conftest import MakeConsumer, Queues, drain, event, lambda_context, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from local_aws.dynamodb_local import DynamoDBLocal


@pytest.fixture
def make_consumer(make_consumer: MakeConsumer) -> MakeConsumer:
    """The shared factory, keyed on the `id` field these bodies carry."""
    return functools.partial(make_consumer, key="id")


def outcomes(consumer: SqsConsumer) -> list[Outcome]:
    return [r.outcome for r in consumer.last_results]


def reasons(sqs: SQSClient, queues: Queues) -> list[str]:
    """The error type each DLQ message carries (plain or packed)."""
    found = []
    for message in drain(sqs, queues.dlq_url):
        attributes = message.get("MessageAttributes", {})
        if "eo-error-type" in attributes:
            found.append(attributes["eo-error-type"]["StringValue"])
        else:
            found.append(json.loads(attributes["eo-failure"]["StringValue"])["eo-error-type"])
    return found


# -- 2. valid JSON that is still hostile --------------------------------------------------


def test_a_lone_surrogate_in_the_body_or_key_is_processed(make_consumer: MakeConsumer) -> None:
    ran: list[str] = []
    consumer = make_consumer(lambda body, ctx: ran.append(ctx.key))
    in_body = sqs_record('{"id": "k-1", "note": "cut inside an emoji: \\ud83d"}')
    in_key = sqs_record('{"id": "k-\\ud83d"}')
    assert consumer(event(in_body, in_key), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.PROCESSED, Outcome.PROCESSED]
    assert consumer(event(in_key), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.DUPLICATE]
    assert len(ran) == 2


def test_deep_nesting_and_a_raising_key_function_go_to_the_dlq_with_reasons(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues
) -> None:
    deep = sqs_record("[" * 100_000 + "]" * 100_000)

    def key_of(record: dict[str, Any]) -> str:
        raise LookupError("no tenant header")

    consumer = make_consumer(lambda body, ctx: None)
    assert consumer(event(deep), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.PERMANENT]
    by_function = make_consumer(lambda body, ctx: None, key=key_of)
    assert by_function(event(sqs_record({"id": "x"})), lambda_context()) == {
        "batchItemFailures": []
    }
    assert outcomes(by_function) == [Outcome.PERMANENT]
    assert sorted(reasons(sqs, queues)) == ["MissingKey", "NonJsonBody"]


def test_hostile_input_in_a_fifo_group_does_not_take_the_group_down(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues
) -> None:
    arn = "arn:aws:sqs:us-east-1:123456789012:payments.fifo"
    consumer = make_consumer(lambda body, ctx: "paid")
    bad = sqs_record("[" * 50_000 + "]" * 50_000, arn=arn, group_id="acct-1")
    good = sqs_record({"id": "p-1"}, arn=arn, group_id="acct-1")
    assert consumer(event(bad, good), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.PERMANENT, Outcome.PROCESSED]
    assert reasons(sqs, queues) == ["NonJsonBody"]


def test_a_result_with_a_lone_surrogate_completes(
    make_consumer: MakeConsumer, ddb: DynamoDBClient, idempotency_table: str, scope: str
) -> None:
    consumer = make_consumer(lambda body, ctx: {"cut": "\ud83d"})
    record = sqs_record({"id": "s-1"})
    assert consumer(event(record), lambda_context(timeout_ms=5_000)) == {"batchItemFailures": []}
    stored = IdempotencyStore(idempotency_table, client=ddb).get(scope, "s-1")
    assert stored is not None
    assert stored.status is Status.COMPLETED
    assert stored.result == {"cut": "\ud83d"}


def test_a_key_function_raising_a_base_exception_fails_only_its_record(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues
) -> None:
    def key_of(record: dict[str, Any]) -> str:
        if "cancel" in record["body"]:
            raise asyncio.CancelledError
        return str(json.loads(record["body"])["id"])

    consumer = make_consumer(lambda body, ctx: "ok", key=key_of)
    bad, good = sqs_record({"id": "x", "cancel": 1}), sqs_record({"id": "y"})
    assert consumer(event(bad, good), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.PERMANENT, Outcome.PROCESSED]
    assert reasons(sqs, queues) == ["MissingKey"]


# -- 3. results that used to poison every later duplicate ---------------------------------


@pytest.mark.parametrize(
    "result",
    [
        {(1, 2), ("a", "b")},
        {"__eo_decimal__": "x"},
        {"__eo_set__": [1], "other": 1},
        [{"__eo_bytes__": "!!"}, Decimal("1.10"), b"\x00\xff", frozenset({1})],
        10**5000,
        {1: "int key", (2, 3): "tuple key"},
    ],
    ids=["set-of-tuples", "tag-lookalike", "tag-lookalike-2", "mixed", "huge-int", "odd-keys"],
)
def test_awkward_results_round_trip_and_never_fail_a_duplicate(
    make_consumer: MakeConsumer,
    ddb: DynamoDBClient,
    idempotency_table: str,
    scope: str,
    result: Any,
) -> None:
    consumer = make_consumer(lambda body, ctx: result)
    record = sqs_record({"id": "r-1"})
    assert consumer(event(record), lambda_context(timeout_ms=5_000)) == {"batchItemFailures": []}
    assert consumer(event(record), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.DUPLICATE]
    stored = IdempotencyStore(idempotency_table, client=ddb).get(scope, "r-1")
    assert stored is not None
    assert stored.result == result


def test_a_result_cap_that_cannot_fit_an_item_is_a_configuration_error(
    make_consumer: MakeConsumer,
) -> None:
    ran: list[int] = []

    def big(body: Any, ctx: RecordContext) -> str:
        ran.append(1)
        return "x" * 450_000

    consumer = make_consumer(big, result_cap_bytes=500_000)
    response = consumer(event(sqs_record({"id": "c-1"})), lambda_context(timeout_ms=5_000))
    assert len(response["batchItemFailures"]) == 1
    assert ran == []  # nothing ran that could not be recorded
    [result] = consumer.last_results
    assert result.reason is not None
    assert "configuration" in result.reason


# -- 6. replays cannot be forged ----------------------------------------------------------


def attributes_of(message: dict[str, Any]) -> dict[str, str]:
    return {k: v["StringValue"] for k, v in message.get("MessageAttributes", {}).items()}


def test_a_producer_attribute_named_eo_does_not_replay_a_permanent_failure(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues
) -> None:
    runs: list[int] = []

    def once_permanent(body: Any, ctx: RecordContext) -> str:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            raise PermanentError("card declined")
        return "ok"

    consumer = make_consumer(once_permanent)
    consumer(event(sqs_record({"id": "f-1"})), lambda_context())
    [dead] = drain(sqs, queues.dlq_url)

    forged = sqs_record({"id": "f-1"}, attributes={"eo-region": "eu", "eo-replay-nonce": "guess"})
    assert consumer(event(forged), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.PERMANENT]
    assert runs == [1]  # the forged message did not re-run it
    drain(sqs, queues.dlq_url)

    replay = to_lambda_record(dead, queues.source_arn, "us-east-1")
    assert consumer(event(replay), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.PROCESSED]
    assert runs == [1, 2]
    again = to_lambda_record(dead, queues.source_arn, "us-east-1")  # the same replay twice
    assert consumer(event(again), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.DUPLICATE]


def test_a_blocked_payment_is_released_only_by_its_own_replay(
    make_consumer: MakeConsumer,
    sqs: SQSClient,
    queues: Queues,
    ddb: DynamoDBClient,
    idempotency_table: str,
    scope: str,
) -> None:
    crashed = IdempotencyStore(idempotency_table, client=ddb)
    assert crashed.acquire(scope, "pay-1", lease_ms=-1, owner="died").acquired
    runs: list[int] = []
    consumer = make_consumer(lambda body, ctx: runs.append(1), block_takeover=True)
    consumer(event(sqs_record({"id": "pay-1"})), lambda_context())
    assert outcomes(consumer) == [Outcome.PERMANENT]
    [dead] = drain(sqs, queues.dlq_url)
    assert attributes_of(dead)["eo-error-type"] == "LeaseExpired"

    forged = sqs_record({"id": "pay-1"}, attributes={"eo-error-type": "LeaseExpired"})
    consumer(event(forged), lambda_context())
    assert runs == []
    drain(sqs, queues.dlq_url)
    consumer(event(to_lambda_record(dead, queues.source_arn, "us-east-1")), lambda_context())
    assert outcomes(consumer) == [Outcome.PROCESSED]
    assert runs == [1]


# -- 7. a fenced effect happens once per key, whatever the record's TTL -------------------


def test_a_replay_after_the_record_expired_does_not_repeat_the_effect(
    make_consumer: MakeConsumer,
    ddb: DynamoDBClient,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
) -> None:
    consumer = make_consumer(lambda body, ctx: record_effect(ctx, {"n": 1}, table=ledger_table))
    consumer(event(sqs_record({"id": "w-1"})), lambda_context())
    ddb.delete_item(  # day 16: the record's TTL passed and the sweep deleted it
        TableName=idempotency_table, Key={"id": {"S": schema.record_id(scope, "w-1")}}
    )
    consumer(event(sqs_record({"id": "w-1"})), lambda_context())
    assert outcomes(consumer) == [Outcome.PROCESSED]
    entries = ddb.query(
        TableName=ledger_table,
        KeyConditionExpression="pk = :k",
        ExpressionAttributeValues={":k": {"S": "w-1"}},
    )["Items"]
    assert len(entries) == 1


# -- 8. a message with ten attributes survives the DLQ and its replay ---------------------


def test_a_ten_attribute_message_is_replayed_with_every_attribute(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues
) -> None:
    names = [f"a{n}" for n in range(9)] + ["tenant"]
    attributes = {name: f"v-{name}" for name in names}
    runs: list[str] = []

    def fails_once(body: Any, ctx: RecordContext) -> None:
        runs.append(ctx.key)
        if len(runs) == 1:
            raise PermanentError("fix me first")

    consumer = make_consumer(fails_once, key="attribute:tenant")
    consumer(event(sqs_record({"x": 1}, attributes=attributes)), lambda_context())
    [dead] = drain(sqs, queues.dlq_url)
    assert len(dead["MessageAttributes"]) <= 10
    replay = to_lambda_record(dead, queues.source_arn, "us-east-1")
    assert consumer(event(replay), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(consumer) == [Outcome.PROCESSED]
    assert runs == ["v-tenant", "v-tenant"]


# -- 9. BaseException is caught per record ------------------------------------------------


@pytest.mark.parametrize("raised", [asyncio.CancelledError(), SystemExit(3)])
def test_a_base_exception_fails_only_its_record(
    make_consumer: MakeConsumer,
    ddb: DynamoDBClient,
    idempotency_table: str,
    scope: str,
    raised: BaseException,
) -> None:
    def fn(body: Any, ctx: RecordContext) -> str:
        if body["id"] == "bad":
            raise raised
        return "ok"

    consumer = make_consumer(fn)
    bad, good = sqs_record({"id": "bad"}), sqs_record({"id": "good"})
    assert consumer(event(bad, good), lambda_context()) == {
        "batchItemFailures": [{"itemIdentifier": bad["messageId"]}]
    }
    assert outcomes(consumer) == [Outcome.FAILED, Outcome.PROCESSED]
    stored = IdempotencyStore(idempotency_table, client=ddb).get(scope, "bad")
    assert stored is not None
    assert stored.status is Status.FAILED
    assert stored.error is not None
    assert stored.error.retryable


# -- 11. completion retries end without a Lambda context ----------------------------------


class _Always(random.Random):
    """Throttle every request."""

    def random(self) -> float:
        return 0.0


def test_completion_retries_are_bounded_without_a_lambda_context(
    make_consumer: MakeConsumer, dynamodb_local: DynamoDBLocal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted, not timed: the batch's write, then COMPLETE_ATTEMPTS calls of the key's own, of 2
    botocore attempts each, then reported failed. (An unbounded loop would hang here until
    pytest-timeout stops it.)"""
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    throttled: list[str] = []

    def then_throttle_everything(body: Any, ctx: RecordContext) -> str:
        install_throttling(client, 1.0, _Always(), throttled.append)  # completion can't land
        return "done"

    no_waiting = SimpleNamespace(time=time.time, sleep=lambda _: None)
    monkeypatch.setattr(completion_module, "time", no_waiting)  # the layer's backoff only
    consumer = make_consumer(then_throttle_everything, dynamodb_client=client)
    record = sqs_record({"id": "b-1"})
    response = consumer(event(record), None)  # no Lambda context: no deadline to stop it
    assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert outcomes(consumer) == [Outcome.ERROR]
    # The batch's gathered write, then the key's own: the store's fallback for the key, and
    # the lock's AFTER_BATCH more (each of botocore's 2 attempts).
    single = 2 * (1 + held_lock.AFTER_BATCH)
    assert single == 2 * completion_module.COMPLETE_ATTEMPTS
    assert throttled == ["BatchExecuteStatement"] * 2 + ["UpdateItem"] * single
