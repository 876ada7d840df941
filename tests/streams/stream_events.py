"""Lambda stream events as AWS documents them: Kinesis, DynamoDB Streams, Kafka (MSK and
self-managed), built from payloads for the stream consumer's tests."""

from __future__ import annotations

import base64
import json
from typing import Any

KINESIS_ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"
TABLE_STREAM_ARN = (
    "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/2026-11-27T00:00:00.000"
)
MSK_ARN = (
    "arn:aws:kafka:us-east-1:123456789012:cluster/orders/abcd1234-0123-4567-89ab-0123456789ab-2"
)


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode()


def kinesis_record(
    payload: Any,
    sequence: int,
    *,
    shard: str = "shardId-000000000000",
    partition_key: str = "pk",
    raw: bytes | None = None,
) -> dict[str, Any]:
    data = raw if raw is not None else json.dumps(payload).encode()
    seq = f"{49590338271490256608559692538361571095921575989136588898 + sequence}"
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": partition_key,
            "sequenceNumber": seq,
            "data": b64(data),
            "approximateArrivalTimestamp": 1545084650.987,
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard}:{seq}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/lambda-role",
        "awsRegion": "us-east-1",
        "eventSourceARN": KINESIS_ARN,
    }


def dynamodb_record(
    new_image: dict[str, Any] | None,
    sequence: int,
    *,
    event_name: str = "INSERT",
    old_image: dict[str, Any] | None = None,
    keys: dict[str, Any] | None = None,
) -> dict[str, Any]:
    change: dict[str, Any] = {
        "ApproximateCreationDateTime": 1_800_000_000,
        "Keys": keys or {"id": {"S": "k"}},
        "SequenceNumber": f"{111 + sequence:021d}",
        "SizeBytes": 26,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new_image is not None:
        change["NewImage"] = new_image
    if old_image is not None:
        change["OldImage"] = old_image
    return {
        "eventID": f"e{sequence}",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": change,
        "eventSourceARN": TABLE_STREAM_ARN,
    }


def kafka_record(
    payload: Any,
    offset: int,
    *,
    topic: str = "orders",
    partition: int = 0,
    key: bytes | None = b"order-key",
    headers: dict[str, bytes] | None = None,
    raw: bytes | None = None,
) -> dict[str, Any]:
    value = raw if raw is not None else json.dumps(payload).encode()
    record: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": 1545084650987,
        "timestampType": "CREATE_TIME",
        "value": b64(value),
        "headers": [{name: list(data)} for name, data in (headers or {}).items()],
    }
    if key is not None:
        record["key"] = b64(key)
    return record


def records_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def kafka_event(*records: dict[str, Any], self_managed: bool = False) -> dict[str, Any]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        grouped.setdefault(f"{record['topic']}-{record['partition']}", []).append(record)
    event: dict[str, Any] = {
        "eventSource": "SelfManagedKafka" if self_managed else "aws:kafka",
        "bootstrapServers": "b-1.orders.kafka.us-east-1.amazonaws.com:9092",
        "records": grouped,
    }
    if not self_managed:
        event["eventSourceArn"] = MSK_ARN
    return event
