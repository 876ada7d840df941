"""The Kinesis side of the chaos run: the stream, the producer's puts, a shard's batch as Lambda
hands it to the function.

Records are put in plan order (PutRecords keeps a request's order within each shard), and each
put's shard and sequence number are kept: the books order a shard's effects by them.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from typing import Any

from fault_injection.stream_workload import PlannedRecord

KinesisClient = Any  # the dev requirements carry no Kinesis stubs

PUT_CHUNK = 500  # PutRecords' limit


@dataclass(frozen=True)
class Position:
    shard: str
    sequence: str

    @property
    def number(self) -> int:
        """Sequence numbers are decimal strings that compare as integers."""
        return int(self.sequence)


def create_stream(kinesis: KinesisClient, name: str, shards: int) -> tuple[str, list[str]]:
    """(stream ARN, shard ids) of a new active stream."""
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    deadline = time.monotonic() + 30
    while True:
        description = kinesis.describe_stream(StreamName=name)["StreamDescription"]
        if description["StreamStatus"] == "ACTIVE":
            return description["StreamARN"], [s["ShardId"] for s in description["Shards"]]
        if time.monotonic() > deadline:
            raise TimeoutError(f"stream {name} is not ACTIVE after 30 s")
        time.sleep(0.2)


def put_records(
    kinesis: KinesisClient, stream: str, records: list[PlannedRecord]
) -> list[Position]:
    """Put every record, in order; its position, by plan index. A record the stream refused is
    put again on its own before the next chunk (as a producer's retry would, keeping order)."""
    positions: list[Position] = []
    for start in range(0, len(records), PUT_CHUNK):
        chunk = records[start : start + PUT_CHUNK]
        answer = kinesis.put_records(
            StreamName=stream,
            Records=[{"Data": r.data, "PartitionKey": r.partition_key} for r in chunk],
        )
        for record, result in zip(chunk, answer["Records"], strict=True):
            if "SequenceNumber" not in result:  # throttled: put it alone, now
                single = kinesis.put_record(
                    StreamName=stream, Data=record.data, PartitionKey=record.partition_key
                )
                positions.append(Position(single["ShardId"], single["SequenceNumber"]))
            else:
                positions.append(Position(result["ShardId"], result["SequenceNumber"]))
    return positions


def read_batch(
    kinesis: KinesisClient, stream: str, shard: str, checkpoint: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` records after the checkpoint (from the shard's start without one)."""
    if checkpoint is None:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
    else:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream,
            ShardId=shard,
            ShardIteratorType="AFTER_SEQUENCE_NUMBER",
            StartingSequenceNumber=checkpoint,
        )["ShardIterator"]
    return list(kinesis.get_records(ShardIterator=iterator, Limit=limit)["Records"])


def lambda_record(
    record: dict[str, Any], shard: str, stream_arn: str, region: str
) -> dict[str, Any]:
    """A GetRecords record in the shape of a Lambda Kinesis event's record."""
    arrival = record.get("ApproximateArrivalTimestamp")
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "data": base64.b64encode(record["Data"]).decode("ascii"),
            "approximateArrivalTimestamp": arrival.timestamp() if arrival else time.time(),
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard}:{record['SequenceNumber']}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/chaos-consumer",
        "awsRegion": region,
        "eventSourceARN": stream_arn,
    }


def checkpoint_after(records: list[dict[str, Any]], response: Any) -> str | None:
    """Where the shard's checkpoint moves after an invocation: the record before the lowest
    reported failure, or the batch's last record; None when the first record failed (or the
    response cannot be read: the whole batch is retried, as Lambda does)."""
    if not records:
        return None
    sequences = [r["kinesis"]["sequenceNumber"] for r in records]
    if not isinstance(response, dict) or not isinstance(response.get("batchItemFailures"), list):
        return None
    failed: list[int] = []
    for item in response["batchItemFailures"]:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(identifier, str) or identifier not in sequences:
            return None  # Lambda fails the whole batch on an identifier it cannot place
        failed.append(sequences.index(identifier))
    if not failed:
        return str(sequences[-1])
    first = min(failed)
    return str(sequences[first - 1]) if first > 0 else None
