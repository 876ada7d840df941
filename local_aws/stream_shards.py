"""Reading a stream's shards as Lambda's event source mapping reads them, from two real backends:
Kinesis served by moto and DynamoDB Streams served by DynamoDB Local.

A `ShardSource` lists the shards (with their parents: a child is read once its parent is done),
opens an iterator at a position (TRIM_HORIZON, AT_ or AFTER_SEQUENCE_NUMBER: a checkpoint is
"after the last record done", a retry "at the first record to redo") and reads records, each
already in the shape Lambda puts in the event's `Records`, so the poller (`stream_poller`) only
decides what to invoke and where to checkpoint. The two backends differ only here.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

TRIM_HORIZON = "TRIM_HORIZON"
AT_SEQUENCE_NUMBER = "AT_SEQUENCE_NUMBER"
AFTER_SEQUENCE_NUMBER = "AFTER_SEQUENCE_NUMBER"

# Lambda's invoking role appears in every Kinesis record; a local one stands in for it.
LOCAL_ROLE_ARN = "arn:aws:iam::123456789012:role/local-stream-poller"


@dataclass(frozen=True)
class Position:
    """Where a read starts: the shard's oldest record, at a sequence number, or after one."""

    kind: str = TRIM_HORIZON
    sequence: str | None = None

    @classmethod
    def after(cls, sequence: str) -> Position:
        return cls(AFTER_SEQUENCE_NUMBER, sequence)

    @classmethod
    def at(cls, sequence: str) -> Position:
        return cls(AT_SEQUENCE_NUMBER, sequence)


@dataclass(frozen=True)
class Shard:
    shard_id: str
    parent_id: str | None = None
    # set once the shard is closed (after a reshard): its last record's sequence number
    ending_sequence: str | None = None

    @property
    def closed(self) -> bool:
        return self.ending_sequence is not None


@dataclass(frozen=True)
class StreamRecord:
    """One record read from a shard: its position, when it arrived, and its Lambda form."""

    shard_id: str
    sequence: str
    arrival: float  # epoch seconds (Kinesis arrival, DynamoDB ApproximateCreationDateTime)
    event_record: Mapping[str, Any]

    @property
    def order(self) -> int:
        """Sequence numbers are decimal strings of varying width: compare them as numbers."""
        return int(self.sequence)


@dataclass(frozen=True)
class ShardRead:
    records: list[StreamRecord]
    next_iterator: str | None  # None: a closed shard read to its end


class ShardSource(Protocol):
    """A stream seen from the event source mapping."""

    event_source: str  # the records' eventSource: "aws:kinesis" / "aws:dynamodb"
    batch_info_key: str  # the on-failure message's batch section
    stream_arn: str

    def shards(self) -> list[Shard]: ...

    def iterator(self, shard_id: str, position: Position) -> str | None: ...

    def read(self, shard_id: str, iterator: str, limit: int) -> ShardRead: ...


def epoch(value: Any) -> float:
    """boto3 parses timestamps into datetimes; Lambda's events carry epoch seconds."""
    if isinstance(value, dt.datetime):
        return value.timestamp()
    return float(value or 0)


def iterator_arguments(position: Position, sequence_name: str) -> dict[str, str]:
    arguments = {"ShardIteratorType": position.kind}
    if position.kind != TRIM_HORIZON:
        if position.sequence is None:
            raise ValueError(f"{position.kind} needs a sequence number")
        arguments[sequence_name] = position.sequence
    return arguments


@dataclass
class KinesisShards:
    """A Kinesis data stream (moto's, or any endpoint's) read with the shared-throughput API."""

    client: Any  # boto3 "kinesis" client
    stream_name: str
    region: str = "us-east-1"
    event_source: str = "aws:kinesis"
    batch_info_key: str = "KinesisBatchInfo"
    stream_arn: str = ""

    def __post_init__(self) -> None:
        if not self.stream_arn:
            summary = self.client.describe_stream_summary(StreamName=self.stream_name)
            self.stream_arn = str(summary["StreamDescriptionSummary"]["StreamARN"])

    def shards(self) -> list[Shard]:
        found: list[Shard] = []
        arguments: dict[str, Any] = {"StreamName": self.stream_name}
        while True:
            page = self.client.list_shards(**arguments)
            for shard in page.get("Shards", []):
                found.append(
                    Shard(
                        shard["ShardId"],
                        shard.get("ParentShardId"),
                        shard.get("SequenceNumberRange", {}).get("EndingSequenceNumber"),
                    )
                )
            token = page.get("NextToken")
            if not token:
                return found
            arguments = {"NextToken": token}

    def iterator(self, shard_id: str, position: Position) -> str | None:
        response = self.client.get_shard_iterator(
            StreamName=self.stream_name,
            ShardId=shard_id,
            **iterator_arguments(position, "StartingSequenceNumber"),
        )
        return response.get("ShardIterator")  # type: ignore[no-any-return]

    def read(self, shard_id: str, iterator: str, limit: int) -> ShardRead:
        response = self.client.get_records(ShardIterator=iterator, Limit=limit)
        records = [self._record(shard_id, raw) for raw in response.get("Records", [])]
        return ShardRead(records, response.get("NextShardIterator"))

    def _record(self, shard_id: str, raw: Mapping[str, Any]) -> StreamRecord:
        sequence = str(raw["SequenceNumber"])
        arrival = epoch(raw.get("ApproximateArrivalTimestamp"))
        event_record = {
            "kinesis": {
                "kinesisSchemaVersion": "1.0",
                "partitionKey": raw["PartitionKey"],
                "sequenceNumber": sequence,
                "data": base64.b64encode(bytes(raw["Data"])).decode("ascii"),
                "approximateArrivalTimestamp": arrival,
            },
            "eventSource": self.event_source,
            "eventVersion": "1.0",
            "eventID": f"{shard_id}:{sequence}",
            "eventName": "aws:kinesis:record",
            "invokeIdentityArn": LOCAL_ROLE_ARN,
            "awsRegion": self.region,
            "eventSourceARN": self.stream_arn,
        }
        return StreamRecord(shard_id, sequence, arrival, event_record)


def lambda_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    """An AttributeValue as it travels in Lambda's JSON event: binaries (B, BS) as base64 text,
    maps and lists converted all the way down; boto3 hands binaries over as bytes."""
    ((kind, inner),) = value.items()
    if kind == "B":
        return {"B": base64.b64encode(bytes(inner)).decode("ascii")}
    if kind == "BS":
        return {"BS": [base64.b64encode(bytes(item)).decode("ascii") for item in inner]}
    if kind == "M":
        return {"M": lambda_image(inner)}
    if kind == "L":
        return {"L": [lambda_attribute(item) for item in inner]}
    return {kind: inner}


def lambda_image(image: Mapping[str, Any]) -> dict[str, Any]:
    return {name: lambda_attribute(value) for name, value in image.items()}


@dataclass
class DynamoDBStreamShards:
    """A DynamoDB table's stream (DynamoDB Local's, or any endpoint's)."""

    client: Any  # boto3 "dynamodbstreams" client
    stream_arn: str
    region: str = "us-east-1"
    event_source: str = "aws:dynamodb"
    batch_info_key: str = "DDBStreamBatchInfo"

    def shards(self) -> list[Shard]:
        found: list[Shard] = []
        arguments: dict[str, Any] = {"StreamArn": self.stream_arn}
        while True:
            description = self.client.describe_stream(**arguments)["StreamDescription"]
            for shard in description.get("Shards", []):
                found.append(
                    Shard(
                        shard["ShardId"],
                        shard.get("ParentShardId"),
                        shard.get("SequenceNumberRange", {}).get("EndingSequenceNumber"),
                    )
                )
            last = description.get("LastEvaluatedShardId")
            if not last:
                return found
            arguments = {"StreamArn": self.stream_arn, "ExclusiveStartShardId": last}

    def iterator(self, shard_id: str, position: Position) -> str | None:
        response = self.client.get_shard_iterator(
            StreamArn=self.stream_arn,
            ShardId=shard_id,
            **iterator_arguments(position, "SequenceNumber"),
        )
        return response.get("ShardIterator")  # type: ignore[no-any-return]

    def read(self, shard_id: str, iterator: str, limit: int) -> ShardRead:
        response = self.client.get_records(ShardIterator=iterator, Limit=min(limit, 1000))
        records = [self._record(shard_id, raw) for raw in response.get("Records", [])]
        return ShardRead(records, response.get("NextShardIterator"))

    def _record(self, shard_id: str, raw: Mapping[str, Any]) -> StreamRecord:
        change = raw["dynamodb"]
        arrival = epoch(change.get("ApproximateCreationDateTime"))
        dynamodb: dict[str, Any] = {"ApproximateCreationDateTime": arrival}
        for name in ("Keys", "NewImage", "OldImage"):
            if name in change:
                dynamodb[name] = lambda_image(change[name])
        dynamodb["SequenceNumber"] = change["SequenceNumber"]
        dynamodb["SizeBytes"] = change.get("SizeBytes", 0)
        dynamodb["StreamViewType"] = change.get("StreamViewType", "NEW_AND_OLD_IMAGES")
        event_record: dict[str, Any] = {
            "eventID": raw.get("eventID", ""),
            "eventName": raw.get("eventName", ""),
            "eventVersion": raw.get("eventVersion", "1.1"),
            "eventSource": self.event_source,
            "awsRegion": self.region,
            "dynamodb": dynamodb,
            "eventSourceARN": self.stream_arn,
        }
        if "userIdentity" in raw:  # a TTL deletion's
            event_record["userIdentity"] = dict(raw["userIdentity"])
        return StreamRecord(shard_id, str(change["SequenceNumber"]), arrival, event_record)
