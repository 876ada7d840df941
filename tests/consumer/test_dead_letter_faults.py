"""The DLQ send (the layer's one SQS write) under a lost reply, a throttle past the retries and
a crash on either side of it.

Every case must end with the failure for a person to see, and a replay of whatever reached the
DLQ, however many copies, running the handler once more at most.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from exactly_once import Outcome, PermanentError, RecordContext, SqsConsumer, sqs_consumer
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.records import ErrorInfo
from exactly_once.stores.schema import Status
from fault_injection.lost_replies import install_lost_replies, lose_next
from fault_injection.throttling import error_response
from local_aws.poller import to_lambda_record
from tests.consumer.conftest import Queues, drain, event, lambda_context, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

THROTTLED = json.dumps(
    {"__type": "com.amazonaws.sqs#RequestThrottled", "message": "throttled (injected)"}
).encode()


class Declines:
    """A handler that fails permanently (with `reason`) on its first run and succeeds on any
    later one."""

    def __init__(self, reason: str = "card declined") -> None:
        self.reason = reason
        self.runs = 0

    def __call__(self, body: Any, ctx: RecordContext) -> str:
        self.runs += 1
        if self.runs == 1:
            raise PermanentError(self.reason)
        return "ok"


@pytest.fixture
def own_sqs(moto_endpoint: str) -> SQSClient:
    """A client of this test's own, so its fault hooks reach no other test."""
    return boto3.client("sqs", endpoint_url=moto_endpoint, region_name="us-east-1")


@pytest.fixture
def consumer_on(ddb: DynamoDBClient, idempotency_table: str, scope: str, queues: Queues) -> Any:
    def build(handler: Declines, sqs: SQSClient) -> SqsConsumer:
        return sqs_consumer(
            table_name=idempotency_table,
            scope=scope,
            key="orderId",
            dead_letter_queue_url=queues.dlq_url,
            dynamodb_client=ddb,
            sqs_client=sqs,
        )(handler)

    return build


def nonce(message: dict[str, Any]) -> str:
    return str(message["MessageAttributes"]["eo-replay-nonce"]["StringValue"])


def replay_all(consumer: SqsConsumer, dead: list[dict[str, Any]], queues: Queues) -> list[Outcome]:
    found = []
    for message in dead:
        record = to_lambda_record(message, queues.source_arn, "us-east-1")
        assert consumer(event(record), lambda_context()) == {"batchItemFailures": []}
        found += [r.outcome for r in consumer.last_results]
    return found


def test_a_lost_send_reply_leaves_two_copies_and_replaying_both_runs_once(
    consumer_on: Any, own_sqs: SQSClient, sqs: SQSClient, queues: Queues
) -> None:
    lost: list[str] = []
    install_lost_replies(own_sqs, lose_next("SendMessage"), lost.append)
    handler = Declines()
    consumer = consumer_on(handler, own_sqs)

    assert consumer(event(sqs_record({"orderId": "o-1"})), lambda_context()) == {
        "batchItemFailures": []
    }
    assert lost == ["SendMessage"]  # applied, reply lost, retried by botocore
    assert [r.outcome for r in consumer.last_results] == [Outcome.PERMANENT]
    dead = drain(sqs, queues.dlq_url)
    assert len(dead) == 2
    assert nonce(dead[0]) == nonce(dead[1])  # both copies present the same failure

    assert replay_all(consumer, dead, queues) == [Outcome.PROCESSED, Outcome.DUPLICATE]
    assert handler.runs == 2  # the original run and one replay


def test_a_send_throttled_past_the_retries_is_reported_and_the_redelivery_dead_letters(
    consumer_on: Any,
    own_sqs: SQSClient,
    sqs: SQSClient,
    queues: Queues,
    store: IdempotencyStore,
    scope: str,
) -> None:
    attempts: list[str] = []

    def throttle(request: Any, **_: Any) -> Any:
        attempts.append(str(request.url))
        return error_response(str(request.url), 400, THROTTLED)

    own_sqs.meta.events.register("before-send.sqs.SendMessage", throttle)
    handler = Declines()
    record = sqs_record({"orderId": "o-2"})
    consumer = consumer_on(handler, own_sqs)

    assert consumer(event(record), lambda_context()) == {
        "batchItemFailures": [{"itemIdentifier": record["messageId"]}]
    }
    assert len(attempts) > 1  # botocore retried the throttle before giving up
    assert drain(sqs, queues.dlq_url) == []
    kept = store.get(scope, "o-2")
    assert kept is not None
    assert kept.status is Status.FAILED  # kept for a person, with its nonce

    # SQS redelivers it; the send gets through now. The handler is not run again.
    own_sqs.meta.events.unregister("before-send.sqs.SendMessage", throttle)
    consumer(event(record), lambda_context())
    assert [r.outcome for r in consumer.last_results] == [Outcome.PERMANENT]
    [dead] = drain(sqs, queues.dlq_url)
    assert handler.runs == 1
    assert replay_all(consumer, [dead], queues) == [Outcome.PROCESSED]
    assert handler.runs == 2


@pytest.mark.parametrize("sent_before_the_crash", [False, True])
def test_a_crash_on_either_side_of_the_send_ends_with_one_replayable_failure(
    consumer_on: Any,
    sqs: SQSClient,
    queues: Queues,
    store: IdempotencyStore,
    scope: str,
    sent_before_the_crash: bool,
) -> None:
    """The process died after writing the FAILED record: before its DLQ send, or after the
    send but before Lambda deleted the message. Either way SQS redelivers the message."""
    handler = Declines()
    handler.runs = 1  # it ran once, and declined, in the process that died
    consumer = consumer_on(handler, sqs)
    record = sqs_record({"orderId": "o-3"})
    lock = store.acquire(scope, "o-3", lease_ms=60_000, owner="died").lock
    assert lock is not None
    failure = store.fail(lock, ErrorInfo("PermanentError", "card declined", retryable=False))
    assert failure.ok
    if sent_before_the_crash:
        consumer(event(record), lambda_context())  # stands for the send that got out

    consumer(event(record), lambda_context())  # the redelivery
    assert [r.outcome for r in consumer.last_results] == [Outcome.PERMANENT]
    dead = drain(sqs, queues.dlq_url)
    assert len(dead) == (2 if sent_before_the_crash else 1)
    assert {nonce(m) for m in dead} == {failure.replay_nonce}
    assert handler.runs == 1  # a redelivery never re-runs a permanent failure
    expected = [Outcome.PROCESSED, Outcome.DUPLICATE][: len(dead)]
    assert replay_all(consumer, dead, queues) == expected
    assert handler.runs == 2
