"""Streams under test for the local stream poller: a Kinesis stream on moto and a DynamoDB table's
stream on DynamoDB Local, each written through its own API, plus a plain recording handler."""

from __future__ import annotations

import base64
import json
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import boto3

from local_aws.stream_shards import DynamoDBStreamShards, KinesisShards, ShardSource

REGION = "us-east-1"


class StreamUnderTest(ABC):
    """One real stream: `put` writes an order, `source` reads it as the mapping does."""

    name: str
    source: ShardSource

    @abstractmethod
    def put(self, order_id: str, **fields: Any) -> None:
        """Write one order to the stream (each backend its own way)."""

    def put_all(self, order_ids: Iterable[str]) -> None:
        for order_id in order_ids:
            self.put(order_id)


class KinesisStream(StreamUnderTest):
    name = "kinesis"

    def __init__(self, endpoint: str, shards: int = 1) -> None:
        self.client = boto3.client("kinesis", endpoint_url=endpoint, region_name=REGION)
        self.stream_name = f"orders-{uuid.uuid4().hex[:10]}"
        self.client.create_stream(StreamName=self.stream_name, ShardCount=shards)
        self.source = KinesisShards(self.client, self.stream_name, REGION)

    def put(self, order_id: str, partition_key: str | None = None, **fields: Any) -> None:
        data = json.dumps({"orderId": order_id, **fields}).encode()
        self.client.put_record(
            StreamName=self.stream_name, Data=data, PartitionKey=partition_key or order_id
        )


class DynamoDBStream(StreamUnderTest):
    name = "dynamodb"

    def __init__(self, endpoint: str) -> None:
        self.client = boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION)
        self.table = f"orders-{uuid.uuid4().hex[:10]}"
        created = self.client.create_table(
            TableName=self.table,
            KeySchema=[{"AttributeName": "orderId", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "orderId", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        arn = created["TableDescription"]["LatestStreamArn"]
        streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name=REGION)
        self.source = DynamoDBStreamShards(streams, arn, REGION)

    def put(self, order_id: str, **fields: Any) -> None:
        item: dict[str, Any] = {"orderId": {"S": order_id}}
        for name, value in fields.items():
            item[name] = {"N": str(value)} if isinstance(value, int) else {"S": str(value)}
        self.client.put_item(TableName=self.table, Item=item)


def order_of(record: dict[str, Any]) -> str:
    """The orderId a Lambda stream record carries, decoded as a consumer decodes it."""
    if record["eventSource"] == "aws:kinesis":
        return str(json.loads(base64.b64decode(record["kinesis"]["data"]))["orderId"])
    image = record["dynamodb"].get("NewImage") or record["dynamodb"]["OldImage"]
    return str(image["orderId"]["S"])


def sequence_of(record: dict[str, Any]) -> str:
    if record["eventSource"] == "aws:kinesis":
        return str(record["kinesis"]["sequenceNumber"])
    return str(record["dynamodb"]["SequenceNumber"])


@dataclass
class RecordingHandler:
    """A plain stream function: records every event it gets; `fail(order)` says how an order
    fails on a call: None (done), "report" (named in batchItemFailures) or "raise" (the
    invocation raises). Reports name every failed record, so the poller must pick the lowest."""

    fail: Callable[[str], str | None] = lambda order: None
    batches: list[list[str]] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    respond: Callable[[list[dict[str, Any]]], Any] | None = None  # overrides the response

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        records = event["Records"]
        self.batches.append([order_of(r) for r in records])
        if self.respond is not None:
            return self.respond(records)
        verdicts = [self.fail(order_of(r)) for r in records]
        if "raise" in verdicts:
            raise RuntimeError("the function failed")
        failures = [
            {"itemIdentifier": sequence_of(r)}
            for r, verdict in zip(records, verdicts, strict=True)
            if verdict == "report"
        ]
        self.done += [
            order_of(r) for r, verdict in zip(records, verdicts, strict=True) if verdict is None
        ]
        return {"batchItemFailures": list(reversed(failures))}
