"""Fixtures for the batch runner: SQS on a moto server, tables on DynamoDB Local."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import RecordContext, SqsConsumer, sqs_consumer
from exactly_once_ops.lambda_context import LocalLambdaContext

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


@dataclass
class Queues:
    source_url: str
    source_arn: str
    dlq_url: str


def make_queues(sqs: SQSClient, fifo: bool = False) -> Queues:
    suffix = ".fifo" if fifo else ""
    attrs: dict[Any, str] = {"FifoQueue": "true"} if fifo else {}
    name = f"q-{uuid.uuid4().hex[:10]}"
    dlq = sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes=attrs)["QueueUrl"]
    src = sqs.create_queue(
        QueueName=f"{name}{suffix}", Attributes={**attrs, "VisibilityTimeout": "1"}
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    return Queues(src, arn, dlq)


@pytest.fixture
def queues(sqs: SQSClient) -> Queues:
    return make_queues(sqs)


@pytest.fixture
def fifo_queues(sqs: SQSClient) -> Queues:
    return make_queues(sqs, fifo=True)


MakeConsumer = Callable[..., SqsConsumer]


@pytest.fixture
def make_consumer(
    ddb: DynamoDBClient, sqs: SQSClient, idempotency_table: str, scope: str, queues: Queues
) -> MakeConsumer:
    """A consumer on the session's tables and this test's queues; keywords override."""

    def build(fn: Callable[[Any, RecordContext], Any], **kwargs: Any) -> SqsConsumer:
        kwargs.setdefault("key", "orderId")
        kwargs.setdefault("dead_letter_queue_url", queues.dlq_url)
        kwargs.setdefault("dynamodb_client", ddb)
        return sqs_consumer(table_name=idempotency_table, scope=scope, sqs_client=sqs, **kwargs)(fn)

    return build


@pytest.fixture
def ledger_consumer(
    ddb: DynamoDBClient, sqs: SQSClient, idempotency_table: str, scope: str
) -> MakeConsumer:
    """A consumer keyed by `id`, no fingerprint and no dead-letter queue: the effect tests'
    (the ledger's items per key are what they check); keywords go to `sqs_consumer`."""

    def build(fn: Callable[[Any, RecordContext], Any], **kwargs: Any) -> SqsConsumer:
        return sqs_consumer(
            key="id",
            table_name=idempotency_table,
            scope=scope,
            dynamodb_client=ddb,
            sqs_client=sqs,
            fingerprint=False,
            **kwargs,
        )(fn)

    return build


def ledger_entries(ddb: DynamoDBClient, table: str, key: str) -> list[dict[str, Any]]:
    """The ledger's items under `key`, read consistently (every write before is seen)."""
    response = ddb.query(
        TableName=table,
        KeyConditionExpression="pk = :k",
        ExpressionAttributeValues={":k": {"S": key}},
        ConsistentRead=True,
    )
    return [dict(i) for i in response["Items"]]


def lambda_context(timeout_ms: int = 30_000) -> LocalLambdaContext:
    """A context whose remaining time counts down from `timeout_ms`."""
    return LocalLambdaContext("test-consumer", timeout_s=timeout_ms / 1000)


def sqs_record(
    body: Any,
    *,
    arn: str = "arn:aws:sqs:us-east-1:123456789012:orders",
    message_id: str | None = None,
    receipt_handle: str = "rh",
    group_id: str | None = None,
    attributes: dict[str, str] | None = None,
) -> dict[str, Any]:
    text = body if isinstance(body, str) else json.dumps(body)
    system = {
        "ApproximateReceiveCount": "1",
        "SentTimestamp": "1700000000000",
        "SenderId": "AIDAEXAMPLE",
        "ApproximateFirstReceiveTimestamp": "1700000000001",
    }
    if group_id is not None:
        system["MessageGroupId"] = group_id
        system["MessageDeduplicationId"] = uuid.uuid4().hex
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": receipt_handle,
        "body": text,
        "attributes": system,
        "messageAttributes": {
            k: {
                "stringValue": v,
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "String",
            }
            for k, v in (attributes or {}).items()
        },
        "md5OfBody": hashlib.md5(text.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": "us-east-1",
    }


def event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def received_record(sqs: SQSClient, queues: Queues, body: Any) -> dict[str, Any]:
    """Send and receive a real message, so its receipt handle works with moto."""
    sqs.send_message(QueueUrl=queues.source_url, MessageBody=json.dumps(body))
    msgs = sqs.receive_message(QueueUrl=queues.source_url, MaxNumberOfMessages=1)["Messages"]
    msg = msgs[0]
    return sqs_record(
        body,
        arn=queues.source_arn,
        message_id=msg["MessageId"],
        receipt_handle=msg["ReceiptHandle"],
    )


def drain(sqs: SQSClient, url: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        msgs = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not msgs:
            return out
        out += [dict(m) for m in msgs]
