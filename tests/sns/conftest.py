"""Fixtures for SNS: topics on the session's moto server, records on DynamoDB Local."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from exactly_once import NotificationContext, SnsSubscriber, sns_subscriber
from tests.consumer.conftest import Queues, make_consumer, make_queues

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient

__all__ = ["make_consumer"]  # the consumer tests' fixture, for fan-out

TOPIC_ARN = "arn:aws:sns:us-east-1:123456789012:sales"


@pytest.fixture(scope="session")
def sns(moto_endpoint: str) -> SNSClient:
    return boto3.client("sns", endpoint_url=moto_endpoint, region_name="us-east-1")


@pytest.fixture
def queues(sqs: SQSClient) -> Queues:
    return make_queues(sqs)


MakeSubscriber = Callable[..., SnsSubscriber]


@pytest.fixture
def make_subscriber(
    ddb: DynamoDBClient, sqs: SQSClient, idempotency_table: str, scope: str, queues: Queues
) -> MakeSubscriber:
    """A subscriber on the session's tables, dead-lettering to this test's DLQ."""

    def build(fn: Callable[[Any, NotificationContext], Any], **kwargs: Any) -> SnsSubscriber:
        kwargs.setdefault("key", "orderId")
        kwargs.setdefault("dead_letter_queue_url", queues.dlq_url)
        kwargs.setdefault("dynamodb_client", ddb)
        kwargs.setdefault("sqs_client", sqs)
        return sns_subscriber(table_name=idempotency_table, scope=scope, **kwargs)(fn)

    return build


def sns_record(
    message: Any,
    *,
    message_id: str | None = None,
    attributes: dict[str, str] | None = None,
    subject: str | None = "sale",
) -> dict[str, Any]:
    """One record of the event SNS gives a subscribed Lambda."""
    text = message if isinstance(message, str) else json.dumps(message)
    return {
        "EventVersion": "1.0",
        "EventSubscriptionArn": f"{TOPIC_ARN}:{uuid.uuid4()}",
        "EventSource": "aws:sns",
        "Sns": {
            "SignatureVersion": "1",
            "Timestamp": "2026-11-23T12:00:00.000Z",
            "Signature": "EXAMPLE",
            "SigningCertUrl": "https://sns.us-east-1.amazonaws.com/cert.pem",
            "MessageId": message_id or str(uuid.uuid4()),
            "Message": text,
            "MessageAttributes": {
                name: {"Type": "String", "Value": value}
                for name, value in (attributes or {}).items()
            },
            "Type": "Notification",
            "UnsubscribeUrl": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
            "TopicArn": TOPIC_ARN,
            "Subject": subject,
        },
    }


def sns_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}
