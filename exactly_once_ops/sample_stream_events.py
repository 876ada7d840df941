"""Stream events for a stream consumer: `eonce invoke orderstream -e events/stream-*.json`.

- `stream-kinesis-orders.json`: one shard's batch of orders, as Lambda's Kinesis mapping sends
  it; o-8002 was put twice (a producer retrying a put whose answer it lost: a new sequence
  number, the same order), so keyed on `orderId` the second is a duplicate. Invoking the file
  again is Lambda delivering the batch again: every record is a duplicate.
- `stream-kinesis-poison.json`: data that is not JSON, then a negative amount (the repo's
  OrderStream raises PermanentError): both go to the DLQ with their reasons, and the shard
  moves on to the good order after them.
- `stream-dynamodb-orders.json`: a DynamoDB table stream (NEW_AND_OLD_IMAGES) with an INSERT, a
  MODIFY and a REMOVE; the payload is the new image (the old one for the REMOVE).

Business ids are the samples' own (o-8xxx, o-9xxx), so invoking them in any order never reuses
a key for another payload. Kafka's samples (events/kafka-*.json) are AWS's documented shapes.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from exactly_once_ops.sample_events import ACCOUNT_ID, REGION, SAMPLE_TIMESTAMP_MS

STREAM_ARN = f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/order-stream"
TABLE_STREAM_ARN = (
    f"arn:aws:dynamodb:{REGION}:{ACCOUNT_ID}:table/orders/stream/2026-01-01T00:00:00.000"
)
SHARD = "shardId-000000000000"
FIRST_SEQUENCE = 49_658_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000_000


def kinesis_event(datas: list[bytes], partition_keys: list[str]) -> dict[str, Any]:
    """One shard's batch, in the shape Lambda's Kinesis event source mapping sends."""
    records = []
    for index, (data, partition_key) in enumerate(zip(datas, partition_keys, strict=True)):
        sequence = str(FIRST_SEQUENCE + index * 1_000)
        records.append(
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": partition_key,
                    "sequenceNumber": sequence,
                    "data": base64.b64encode(data).decode("ascii"),
                    "approximateArrivalTimestamp": SAMPLE_TIMESTAMP_MS / 1000 + index / 10,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": f"{SHARD}:{sequence}",
                "eventName": "aws:kinesis:record",
                "invokeIdentityArn": f"arn:aws:iam::{ACCOUNT_ID}:role/order-stream-role",
                "awsRegion": REGION,
                "eventSourceARN": STREAM_ARN,
            }
        )
    return {"Records": records}


def _order(order_id: str, amount: int, customer: str) -> bytes:
    return json.dumps({"orderId": order_id, "amount": amount, "customerId": customer}).encode()


def _image(order_id: str, amount: str, status: str) -> dict[str, Any]:
    return {
        "orderId": {"S": order_id},
        "amount": {"N": amount},
        "status": {"S": status},
    }


def _change(
    sequence: int, name: str, keys: str, new: dict[str, Any] | None, old: dict[str, Any] | None
) -> dict[str, Any]:
    change: dict[str, Any] = {
        "ApproximateCreationDateTime": SAMPLE_TIMESTAMP_MS // 1000,
        "Keys": {"orderId": {"S": keys}},
        "SequenceNumber": f"{7_000_000_000_000_000_000_000 + sequence}",
        "SizeBytes": 59,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        change["NewImage"] = new
    if old is not None:
        change["OldImage"] = old
    return {
        "eventID": f"{sequence:032x}",
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": change,
        "eventSourceARN": TABLE_STREAM_ARN,
    }


def stream_sample_events() -> dict[str, dict[str, Any]]:
    """The committed stream samples, by file name."""
    orders = [("o-8001", 30, "c-1"), ("o-8002", 45, "c-2"), ("o-8002", 45, "c-2")]
    orders += [("o-8003", 12, "c-1")]
    placed = _image("o-9001", "25", "placed")
    paid = _image("o-9001", "25", "paid")
    gone = _image("o-9002", "40.5", "cancelled")
    return {
        "stream-kinesis-orders.json": kinesis_event(
            [_order(*order) for order in orders], [customer for _, _, customer in orders]
        ),
        "stream-kinesis-poison.json": kinesis_event(
            [
                b"orderId=o-8101;amount=3 (not JSON)",
                _order("o-8102", -5, "c-3"),
                _order("o-8103", 8, "c-3"),
            ],
            ["c-3", "c-3", "c-3"],
        ),
        "stream-dynamodb-orders.json": {
            "Records": [
                _change(1, "INSERT", "o-9001", placed, None),
                _change(2, "MODIFY", "o-9001", paid, placed),
                _change(3, "REMOVE", "o-9002", None, gone),
            ]
        },
    }
