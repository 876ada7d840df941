"""The producer's side of the Kinesis chaos run: the stream and the puts.

Records are put in plan order (PutRecords keeps a request's order within each shard), and each
put's shard and sequence number are kept: the books order a shard's effects by them. (Reading
the shards as Lambda does is `local_aws.stream_shards`'s, in the pollers.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fault_injection.stream_workload import PlannedRecord

KinesisClient = Any  # the dev requirements carry no Kinesis stubs

PUT_CHUNK = 500  # PutRecords' limit


@dataclass(frozen=True)
class Placed:
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


def put_records(kinesis: KinesisClient, stream: str, records: list[PlannedRecord]) -> list[Placed]:
    """Put every record, in order; its position, by plan index. A record the stream refused is
    put again on its own before the next chunk (as a producer's retry would, keeping order)."""
    positions: list[Placed] = []
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
                positions.append(Placed(single["ShardId"], single["SequenceNumber"]))
            else:
                positions.append(Placed(result["ShardId"], result["SequenceNumber"]))
    return positions
