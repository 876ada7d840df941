"""Stream consumers on the session's DynamoDB Local table, with a dead-letter queue on moto."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import RecordContext
from exactly_once.streams import StreamConsumer, stream_consumer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

MakeStreamConsumer = Callable[..., StreamConsumer]


@pytest.fixture
def dlq_url(sqs: SQSClient) -> str:
    return sqs.create_queue(QueueName=f"stream-dlq-{uuid.uuid4().hex[:10]}")["QueueUrl"]


@pytest.fixture
def build(
    ddb: DynamoDBClient, sqs: SQSClient, idempotency_table: str, scope: str, dlq_url: str
) -> MakeStreamConsumer:
    """A stream consumer on the session's table and this test's DLQ; keywords override."""

    def make(fn: Callable[[Any, RecordContext], Any], **kwargs: Any) -> StreamConsumer:
        kwargs.setdefault("key", "orderId")
        return stream_consumer(
            table_name=idempotency_table,
            scope=scope,
            dead_letter_queue_url=dlq_url,
            dynamodb_client=ddb,
            sqs_client=sqs,
            **kwargs,
        )(fn)

    return make


def dead_letters(sqs: SQSClient, url: str) -> list[dict[str, Any]]:
    """Every message in the DLQ: its body and its layer attributes' string values."""
    out: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", [])
        if not got:
            return out
        for message in got:
            attributes = {
                name: value.get("StringValue")
                for name, value in message.get("MessageAttributes", {}).items()
            }
            out.append({"body": message["Body"], "attributes": attributes})
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def reason_of(letter: dict[str, Any]) -> str:
    """The failure a dead letter carries: "<type>: <message>" (plain or packed attributes)."""
    attributes = letter["attributes"]
    packed = json.loads(attributes.get("eo-failure") or "{}")

    def read(name: str) -> str:
        return str(attributes.get(name) or packed.get(name) or "")

    return f"{read('eo-error-type')}: {read('eo-error-message')}"
