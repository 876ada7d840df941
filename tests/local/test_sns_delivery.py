"""SNS → Lambda delivery on the local stack: the event's shape, Lambda's asynchronous retries,
the dead-letter queue after the last one, and the handler's own dead-lettering.

`deliver` runs against in-process moto with a small fake handler that keeps the subscriber
contract (return when done, raise to be retried, dead-letter a permanent failure itself).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parser.models import SnsModel
from moto import mock_aws

from exactly_once_ops.sns_events import sns_envelope, subscription_arn, timestamp
from local_aws.demo import failure_reason
from local_aws.sns_delivery import (
    DEAD_LETTER_QUEUE,
    RETRY_DELAYS_ENV,
    RetryPolicy,
    SubscriberBinding,
    deliver,
    describe_subscribers,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

REGION = "us-east-1"
TOPIC = "arn:aws:sns:us-east-1:123456789012:Sales"


class FakeSubscriber:
    """Keeps the contract of `exactly_once.sns_subscriber`: runs each SNS MessageId once,
    raises while the work fails (`failures` times per message), and sends a permanent failure
    to the DLQ itself, then returns."""

    def __init__(self, sqs: SQSClient, dlq: str, failures: int = 0) -> None:
        self.sqs = sqs
        self.dlq = dlq
        self.failures = failures
        self.calls: list[tuple[str, str]] = []  # (MessageId, request id) per invocation
        self.ran: list[str] = []
        self.last_results: list[Any] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, int]:
        sns = event["Records"][0]["Sns"]
        self.calls.append((sns["MessageId"], context.aws_request_id))
        if sns["MessageId"] in self.ran:
            return {"duplicate": 1}
        try:
            sale = json.loads(sns["Message"])
        except ValueError:
            self.sqs.send_message(
                QueueUrl=self.dlq,
                MessageBody=sns["Message"],
                MessageAttributes={"eo-error-type": {"DataType": "String", "StringValue": "X"}},
            )
            return {"permanent": 1}
        attempts = sum(1 for message_id, _ in self.calls if message_id == sns["MessageId"])
        if attempts <= self.failures:
            raise RuntimeError(f"downstream unavailable for {sale['orderId']}")
        self.ran.append(sns["MessageId"])
        return {"processed": 1}


@pytest.fixture
def sqs() -> Iterator[SQSClient]:
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


@pytest.fixture
def dlq(sqs: SQSClient) -> str:
    return sqs.create_queue(QueueName="sales-counter-dlq")["QueueUrl"]


def binding(dlq: str, retries: int = 2, failure_format: str = "destination") -> SubscriberBinding:
    return SubscriberBinding(
        subscriber="SalesCounter",
        function_name="Stack-SalesCounterFunction-ABC",
        source_dir=".",
        handler="handler.handle",
        environment={},
        timeout_s=3,
        topic_arn=TOPIC,
        subscription_arn=subscription_arn(TOPIC, "fn"),
        tap_queue_url="http://unused",
        dead_letter_queue_url=dlq,
        retry=RetryPolicy(retries=retries, delays_s=(0.5, 1.0)),
        failure_format=failure_format,
        function_arn="arn:aws:lambda:us-east-1:123456789012:function:sales-counter",
    )


def envelope(message: str, message_id: str = "m-1") -> dict[str, Any]:
    return sns_envelope(
        message,
        topic_arn=TOPIC,
        message_id=message_id,
        sent_at=timestamp(),
        subject="sale",
        attributes={"channel": {"Type": "String", "Value": "web"}},
    )


def received(sqs: SQSClient, url: str) -> list[dict[str, Any]]:
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    return [dict(m) for m in got.get("Messages", [])]


def test_the_handler_gets_a_real_shaped_sns_event(sqs: SQSClient, dlq: str) -> None:
    events: list[dict[str, Any]] = []
    deliver(sqs, binding(dlq), lambda event, _: events.append(event), envelope('{"a": 1}'))
    (event,) = events
    SnsModel.model_validate(event)
    (record,) = event["Records"]
    assert record["EventSource"] == "aws:sns"
    assert record["EventSubscriptionArn"] == binding(dlq).subscription_arn
    sns = record["Sns"]
    assert (sns["Type"], sns["MessageId"], sns["TopicArn"]) == ("Notification", "m-1", TOPIC)
    assert (sns["Subject"], sns["Message"]) == ("sale", '{"a": 1}')
    assert sns["MessageAttributes"] == {"channel": {"Type": "String", "Value": "web"}}
    assert sns["Timestamp"].endswith("Z")


def test_a_duplicate_delivery_runs_once(sqs: SQSClient, dlq: str) -> None:
    handler = FakeSubscriber(sqs, dlq)
    first = deliver(sqs, binding(dlq), handler, envelope('{"orderId": "o-1"}'))
    again = deliver(sqs, binding(dlq), handler, envelope('{"orderId": "o-1"}'))
    assert handler.ran == ["m-1"]
    assert (first.attempts, again.attempts) == (1, 1)
    assert first.dead_lettered == again.dead_lettered == 0
    assert received(sqs, dlq) == []


def test_a_retryable_failure_is_retried_with_the_same_event_then_succeeds(
    sqs: SQSClient, dlq: str
) -> None:
    handler = FakeSubscriber(sqs, dlq, failures=1)
    waits: list[float] = []
    stats = deliver(sqs, binding(dlq), handler, envelope('{"orderId": "o-2"}'), sleep=waits.append)
    assert (stats.attempts, stats.raised, stats.dead_lettered) == (2, 1, 0)
    assert waits == [0.5]
    assert handler.ran == ["m-1"]
    (request_id,) = {request for _, request in handler.calls}  # Lambda keeps the request id
    assert request_id
    assert received(sqs, dlq) == []


def test_a_failure_that_persists_is_retried_twice_then_reaches_the_on_failure_destination(
    sqs: SQSClient, dlq: str
) -> None:
    handler = FakeSubscriber(sqs, dlq, failures=10)
    waits: list[float] = []
    stats = deliver(sqs, binding(dlq), handler, envelope('{"orderId": "o-3"}'), sleep=waits.append)
    assert (stats.attempts, stats.raised, stats.dead_lettered) == (3, 3, 1)
    assert waits == [0.5, 1.0]
    assert handler.ran == []
    (message,) = received(sqs, dlq)
    record = json.loads(message["Body"])  # the invocation record Lambda sends a destination
    assert record["requestContext"] == {
        "requestId": handler.calls[0][1],
        "functionArn": "arn:aws:lambda:us-east-1:123456789012:function:sales-counter:$LATEST",
        "condition": "RetriesExhausted",
        "approximateInvokeCount": 3,
    }
    assert record["responseContext"]["functionError"] == "Unhandled"
    assert record["responsePayload"]["errorType"] == "RuntimeError"
    assert record["responsePayload"]["errorMessage"] == "downstream unavailable for o-3"
    assert record["responsePayload"]["stackTrace"]
    sns = record["requestPayload"]["Records"][0]["Sns"]  # the event itself
    assert (sns["MessageId"], sns["Message"]) == ("m-1", '{"orderId": "o-3"}')
    assert failure_reason(message) == "RetriesExhausted"


def test_a_function_with_a_dead_letter_queue_gets_the_event_with_error_attributes(
    sqs: SQSClient, dlq: str
) -> None:
    handler = FakeSubscriber(sqs, dlq, failures=10)
    subscriber = binding(dlq, failure_format=DEAD_LETTER_QUEUE)
    stats = deliver(sqs, subscriber, handler, envelope('{"orderId": "o-6"}'), sleep=lambda _: None)
    assert (stats.attempts, stats.dead_lettered) == (3, 1)
    (message,) = received(sqs, dlq)
    attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attributes == {
        "ErrorMessage": "RuntimeError: downstream unavailable for o-6",
        "ErrorCode": "200",
        "RequestID": handler.calls[0][1],
    }
    event = json.loads(message["Body"])  # the event itself, as Lambda's DLQ gets it
    assert event["Records"][0]["Sns"]["MessageId"] == "m-1"
    assert failure_reason(message) == "RetriesExhausted"


def test_zero_retries_dead_letters_after_the_first_failure(sqs: SQSClient, dlq: str) -> None:
    handler = FakeSubscriber(sqs, dlq, failures=10)
    stats = deliver(sqs, binding(dlq, retries=0), handler, envelope('{"orderId": "o-4"}'))
    assert (stats.attempts, stats.dead_lettered) == (1, 1)
    assert len(received(sqs, dlq)) == 1


def test_a_permanent_failure_is_dead_lettered_by_the_handler_and_not_retried(
    sqs: SQSClient, dlq: str
) -> None:
    handler = FakeSubscriber(sqs, dlq)
    stats = deliver(sqs, binding(dlq), handler, envelope("not JSON {"))
    assert (stats.attempts, stats.raised, stats.dead_lettered) == (1, 0, 0)
    (message,) = received(sqs, dlq)
    assert message["Body"] == "not JSON {"
    assert set(message["MessageAttributes"]) == {"eo-error-type"}  # the handler's, not Lambda's
    assert failure_reason(message) == "X"


def test_a_stop_during_the_wait_abandons_the_delivery(sqs: SQSClient, dlq: str) -> None:
    class Stopped:
        def is_set(self) -> bool:
            return True

    handler = FakeSubscriber(sqs, dlq, failures=10)
    waits: list[float] = []
    stats = deliver(
        sqs,
        binding(dlq),
        handler,
        envelope('{"orderId": "o-5"}'),
        stop=Stopped(),
        sleep=waits.append,
    )
    assert (stats.attempts, stats.abandoned, stats.dead_lettered) == (1, 1, 0)
    assert waits == [0.5]
    assert received(sqs, dlq) == []


def test_outcomes_come_from_the_handlers_last_results(sqs: SQSClient, dlq: str) -> None:
    class Result:
        outcome = "processed"
        takeover = True

    def handler(event: Any, context: Any) -> None:
        handler.last_results = [Result()]  # type: ignore[attr-defined]

    stats = deliver(sqs, binding(dlq), handler, envelope("{}"))
    assert stats.outcomes == {"processed": 1}
    assert stats.takeovers == 1


def test_retry_delays_come_from_the_environment() -> None:
    assert RetryPolicy.from_environment({}) == RetryPolicy()
    policy = RetryPolicy.from_environment({RETRY_DELAYS_ENV: "0.1, 0.2"})
    assert policy.delays_s == (0.1, 0.2)
    assert [policy.delay(n) for n in range(3)] == [0.1, 0.2, 0.2]
    assert RetryPolicy(delays_s=()).delay(0) == 0
    with pytest.raises(ValueError, match="seconds like"):
        RetryPolicy.from_environment({RETRY_DELAYS_ENV: "soon"})
    with pytest.raises(ValueError, match="0 to 2 times"):
        RetryPolicy(retries=3)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(delays_s=(-1,))


def test_the_start_line_names_each_subscriber(dlq: str) -> None:
    assert describe_subscribers([binding(dlq)]) == (
        "SalesCounter on Sales: 2 retries after 0.5s, 1s, timeout 3s"
    )
    assert describe_subscribers([binding(dlq, retries=0)]) == (
        "SalesCounter on Sales: no retries, timeout 3s"
    )


def test_a_message_without_a_reason_was_redriven() -> None:
    assert failure_reason({"Body": "{}", "MessageAttributes": {}}) == "redriven by SQS"
    assert failure_reason({"Body": "not JSON"}) == "redriven by SQS"
    stray = json.dumps({"requestContext": {"condition": "EventAgeExceeded"}})
    assert failure_reason({"Body": stray}) == "redriven by SQS"  # no requestPayload: not a record
