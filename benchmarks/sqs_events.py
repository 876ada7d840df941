"""Lambda SQS events for the benchmark: one record per order, each with a fresh business id."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:bench-orders"


def sqs_record(
    order_id: str, *, receipt_handle: str = "rh", arn: str = QUEUE_ARN
) -> dict[str, Any]:
    """A record shaped like Lambda's SQS event source delivers it."""
    body = json.dumps({"orderId": order_id, "amount": 10, "currency": "EUR"})
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": receipt_handle,
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": "1700000000000",
            "SenderId": "AIDAEXAMPLE",
            "ApproximateFirstReceiveTimestamp": "1700000000001",
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": "us-east-1",
    }


def new_batch(size: int) -> dict[str, Any]:
    """A batch whose business ids were never seen: every record takes the 'new' path."""
    return {"Records": [sqs_record(f"order-{uuid.uuid4().hex}") for _ in range(size)]}
