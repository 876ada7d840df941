"""SNS -> SQS fan-out: the queue consumer reads the notification inside an envelope.

Envelopes come from moto's real SNS -> SQS delivery, so their shape is SNS's, not ours.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, Outcome
from tests.consumer.conftest import (
    MakeConsumer,
    Queues,
    drain,
    event,
    lambda_context,
    sqs_record,
)

if TYPE_CHECKING:
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient


def subscribed_queue(sns: SNSClient, sqs: SQSClient, *, raw: bool) -> tuple[str, str]:
    """A topic and a queue subscribed to it: (topic ARN, queue URL)."""
    topic = sns.create_topic(Name=f"sales-{uuid.uuid4().hex[:8]}")["TopicArn"]
    url = sqs.create_queue(QueueName=f"fan-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "true" if raw else "false"},
    )
    return topic, url


def delivered(sqs: SQSClient, url: str) -> list[dict[str, Any]]:
    """What SNS put in the queue, as records of a Lambda SQS event."""
    records = []
    for message in drain(sqs, url):
        record = sqs_record(message["Body"], message_id=message["MessageId"])
        record["messageAttributes"] = {
            name: {"stringValue": value["StringValue"], "dataType": value["DataType"]}
            for name, value in message.get("MessageAttributes", {}).items()
        }
        records.append(record)
    return records


def test_the_envelope_is_unwrapped_for_a_body_key(
    sns: SNSClient, sqs: SQSClient, make_consumer: MakeConsumer
) -> None:
    topic, url = subscribed_queue(sns, sqs, raw=False)
    sns.publish(TopicArn=topic, Message=json.dumps({"orderId": "o-1", "amount": 3}))
    (record,) = delivered(sqs, url)
    assert json.loads(record["body"])["Type"] == "Notification"  # an envelope, as SNS sends
    seen: list[Any] = []
    consumer = make_consumer(lambda body, ctx: seen.append((body, ctx.key)), sns_envelope="auto")
    assert consumer(event(record), lambda_context()) == {"batchItemFailures": []}
    assert seen == [({"orderId": "o-1", "amount": 3}, "o-1")]


def test_one_sns_message_delivered_twice_to_the_queue_runs_once(
    sns: SNSClient,
    sqs: SQSClient,
    make_consumer: MakeConsumer,
    store: IdempotencyStore,
    scope: str,
) -> None:
    """Two copies in the queue have two SQS messageIds; the key (by default) is the SNS one."""
    topic, url = subscribed_queue(sns, sqs, raw=False)
    published = sns.publish(TopicArn=topic, Message=json.dumps({"amount": 1}))["MessageId"]
    (record,) = delivered(sqs, url)
    again = {**record, "messageId": str(uuid.uuid4())}  # SNS delivered it a second time
    ran: list[str] = []
    consumer = make_consumer(lambda body, ctx: ran.append(ctx.key), key=None, sns_envelope="auto")
    consumer(event(record, again), lambda_context())
    assert [r.outcome for r in consumer.last_results] == [Outcome.PROCESSED, Outcome.DUPLICATE]
    assert ran == [published]
    assert store.get(scope, published) is not None


def test_raw_delivery_keeps_sns_attributes_as_sqs_attributes(
    sns: SNSClient, sqs: SQSClient, make_consumer: MakeConsumer
) -> None:
    topic, url = subscribed_queue(sns, sqs, raw=True)
    sns.publish(
        TopicArn=topic,
        Message=json.dumps({"amount": 2}),
        MessageAttributes={"saleId": {"DataType": "String", "StringValue": "raw-1"}},
    )
    records = delivered(sqs, url)
    (record,) = records
    assert json.loads(record["body"]) == {"amount": 2}  # the message itself, no envelope
    seen: list[Any] = []
    consumer = make_consumer(
        lambda body, ctx: seen.append((body, ctx.key)), key="attribute:saleId", sns_envelope="auto"
    )
    consumer(event(*records, {**record, "messageId": str(uuid.uuid4())}), lambda_context())
    assert seen == [({"amount": 2}, "raw-1")]


def test_an_sns_attribute_inside_an_envelope_is_a_key_too(
    sns: SNSClient, sqs: SQSClient, make_consumer: MakeConsumer
) -> None:
    topic, url = subscribed_queue(sns, sqs, raw=False)
    sns.publish(
        TopicArn=topic,
        Message="plain text, not JSON",
        MessageAttributes={"saleId": {"DataType": "String", "StringValue": "env-attr"}},
    )
    seen: list[Any] = []
    consumer = make_consumer(
        lambda body, ctx: seen.append((body, ctx.key)),
        key="attribute:saleId",
        raw_body=True,
        sns_envelope="auto",
    )
    consumer(event(*delivered(sqs, url)), lambda_context())
    assert seen == [("plain text, not JSON", "env-attr")]


def test_with_the_envelope_off_the_envelope_is_the_body(
    sns: SNSClient, sqs: SQSClient, make_consumer: MakeConsumer, queues: Queues
) -> None:
    topic, url = subscribed_queue(sns, sqs, raw=False)
    sns.publish(TopicArn=topic, Message=json.dumps({"orderId": "off-1"}))
    seen: list[Any] = []
    consumer = make_consumer(
        lambda body, ctx: seen.append(body["Type"]), key="MessageId", sns_envelope="off"
    )
    consumer(event(*delivered(sqs, url)), lambda_context())
    assert seen == ["Notification"]


def test_with_the_envelope_required_a_plain_body_goes_to_the_dlq(
    sqs: SQSClient, make_consumer: MakeConsumer, queues: Queues
) -> None:
    ran: list[Any] = []
    consumer = make_consumer(lambda body, ctx: ran.append(body), sns_envelope="on")
    consumer(event(sqs_record({"orderId": "plain"}), sqs_record("not json")), lambda_context())
    assert [r.outcome for r in consumer.last_results] == [Outcome.PERMANENT] * 2
    letters = drain(sqs, queues.dlq_url)
    assert {m["MessageAttributes"]["eo-error-type"]["StringValue"] for m in letters} == {
        "NotAnEnvelope"
    }
    assert ran == []


@pytest.mark.parametrize(
    "look_alike",
    [
        {"Type": "Notification", "MessageId": "m", "Message": "{}"},  # no TopicArn
        {"Type": "Notification", "MessageId": "", "Message": "{}", "TopicArn": "arn:x"},
        {"Type": "notification", "MessageId": "m", "Message": "{}", "TopicArn": "arn:x"},
        {"Type": "Notification", "MessageId": "m", "Message": {"a": 1}, "TopicArn": "arn:x"},
        {"Type": "Notification", "MessageId": "m", "Message": "{}", "TopicArn": "not-an-arn"},
    ],
)
def test_a_look_alike_body_is_not_unwrapped(
    make_consumer: MakeConsumer, look_alike: dict[str, Any]
) -> None:
    seen: list[Any] = []
    consumer = make_consumer(lambda body, ctx: seen.append(body), key=None, sns_envelope="auto")
    consumer(event(sqs_record(look_alike)), lambda_context())
    assert seen == [look_alike]


def test_by_default_an_envelope_is_a_plain_body(
    sns: SNSClient, sqs: SQSClient, make_consumer: MakeConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off unless asked: a consumer upgraded onto this version keys its messages as before
    (the construct turns it on for the queues it subscribes to a topic)."""
    monkeypatch.delenv("SNS_ENVELOPE", raising=False)  # the default, whatever ran before
    topic, url = subscribed_queue(sns, sqs, raw=False)
    sns.publish(TopicArn=topic, Message=json.dumps({"orderId": "inner"}))
    (record,) = delivered(sqs, url)
    seen: list[Any] = []
    consumer = make_consumer(lambda body, ctx: seen.append((body["Type"], ctx.key)), key=None)
    consumer(event(record), lambda_context())
    assert seen == [("Notification", record["messageId"])]


@pytest.mark.parametrize("mode", ["AUTO", " Auto "])
def test_the_mode_is_read_in_any_case(
    sns: SNSClient, sqs: SQSClient, make_consumer: MakeConsumer, mode: str
) -> None:
    topic, url = subscribed_queue(sns, sqs, raw=False)
    sns.publish(TopicArn=topic, Message=json.dumps({"orderId": "cased"}))
    seen: list[str] = []
    consumer = make_consumer(lambda body, ctx: seen.append(ctx.key), sns_envelope=mode)
    consumer(event(*delivered(sqs, url)), lambda_context())
    assert seen == ["cased"]


def test_a_bad_envelope_mode_fails_every_record_without_losing_one(
    make_consumer: MakeConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SNS_ENVELOPE", "sometimes")
    consumer = make_consumer(lambda body, ctx: None)
    response = consumer(event(sqs_record({"orderId": "x"})), lambda_context())
    assert len(response["batchItemFailures"]) == 1
    assert "SNS_ENVELOPE" in (consumer.last_results[0].reason or "")


def test_a_dead_lettered_envelope_keeps_its_envelope_for_a_replay(
    sns: SNSClient, sqs: SQSClient, make_consumer: MakeConsumer, queues: Queues
) -> None:
    topic, url = subscribed_queue(sns, sqs, raw=False)
    sns.publish(TopicArn=topic, Message=json.dumps({"amount": 1}))  # no orderId
    (record,) = delivered(sqs, url)
    consumer = make_consumer(lambda body, ctx: None, sns_envelope="auto")
    consumer(event(record), lambda_context())
    (letter,) = drain(sqs, queues.dlq_url)
    assert letter["Body"] == record["body"]  # as delivered: a replay is read the same way
    assert letter["MessageAttributes"]["eo-error-type"]["StringValue"] == "MissingKey"


@pytest.mark.parametrize("raw_body", [False, True])
def test_with_the_envelope_auto_a_record_without_a_body_still_goes_to_the_dlq(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues, raw_body: bool
) -> None:
    record = sqs_record({"orderId": "no-body"})
    del record["body"]
    ran: list[Any] = []
    consumer = make_consumer(
        lambda body, ctx: ran.append(body), sns_envelope="auto", raw_body=raw_body
    )
    consumer(event(record), lambda_context())
    assert [r.outcome for r in consumer.last_results] == [Outcome.PERMANENT]
    (letter,) = drain(sqs, queues.dlq_url)
    assert letter["MessageAttributes"]["eo-error-type"]["StringValue"] == "NonJsonBody"
    assert ran == []


def test_with_the_envelope_auto_a_raw_body_that_is_not_json_runs_as_it_is(
    make_consumer: MakeConsumer,
) -> None:
    seen: list[Any] = []
    consumer = make_consumer(
        lambda body, ctx: seen.append(body), key=None, sns_envelope="auto", raw_body=True
    )
    consumer(event(sqs_record("plain text")), lambda_context())
    assert seen == ["plain text"]
