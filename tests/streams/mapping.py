"""A stand-in for Lambda's event source mapping, for tests that redeliver: each shard (or Kafka
partition) has a checkpoint; a batch is read from it; the response moves it.

What the mapping does with a response, as AWS documents it: an empty `batchItemFailures`
checkpoints past the batch; otherwise the shard resumes at the LOWEST position named (an
unknown or empty identifier fails the batch whole, so it is delivered again as it was). A
Kafka batch holds several partitions and each resumes on its own. Nothing here drops a batch
(no retry limit, no record age): the tests check that nothing is lost once failures stop.

And the verdict the tests hold a run to: each key's effect exactly once, and within a shard
the effects in sequence order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.streams.stream_events import (
    dynamodb_record,
    kafka_event,
    kafka_record,
    kinesis_record,
    records_event,
)

Invoke = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Planned:
    """One record a producer put: its shard, its place in it, and its key."""

    shard: int
    index: int
    key: str


@dataclass
class Shard:
    records: list[dict[str, Any]]
    positions: list[Any]  # what a response names for each record
    checkpoint: int = 0

    def done(self) -> bool:
        return self.checkpoint >= len(self.records)


@dataclass
class Effects:
    """What a handler did, in the order it did it: (key, shard, index) per effect."""

    done: list[tuple[str, int, int]] = field(default_factory=list)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def add(self, key: str, shard: int, index: int) -> None:
        with self._guard:
            self.done.append((key, shard, index))


def payload_of(key: str) -> dict[str, Any]:
    """A producer's put: the same key always carries the same order (a retried put is the
    same data), so its fingerprint matches; where it sits is its position (`Mapping.where`)."""
    return {"orderId": key, "total": len(key)}


class Mapping:
    """Shards of `source` ("kinesis", "dynamodb", "kafka") holding `plan`'s records."""

    def __init__(self, source: str, plan: list[Planned], batch_size: int) -> None:
        self.source = source
        self.batch_size = batch_size
        self.shards: dict[int, Shard] = {}
        self.where: dict[str, tuple[int, int]] = {}
        """(shard, index) by the record's message id (`ctx.message_id`)."""
        for shard in sorted({p.shard for p in plan}):
            mine = sorted((p for p in plan if p.shard == shard), key=lambda p: p.index)
            records = [self._record(p) for p in mine]
            self.shards[shard] = Shard(records, [self._position(r) for r in records])
            for p, position in zip(mine, self.shards[shard].positions, strict=True):
                self.where[message_id(position)] = (p.shard, p.index)
        self.invocations = 0

    def _record(self, p: Planned) -> dict[str, Any]:
        payload = payload_of(p.key)
        if self.source == "kinesis":
            return kinesis_record(
                payload,
                p.shard * 100_000 + p.index,
                shard=f"shardId-{p.shard:012d}",
                partition_key=p.key,
            )
        if self.source == "dynamodb":
            image = {"orderId": {"S": p.key}, "total": {"N": str(len(p.key))}}
            return dynamodb_record(image, p.shard * 100_000 + p.index)
        return kafka_record(payload, 1000 + p.index, partition=p.shard, key=p.key.encode())

    def _position(self, record: dict[str, Any]) -> Any:
        if self.source == "kinesis":
            return record["kinesis"]["sequenceNumber"]
        if self.source == "dynamodb":
            return record["dynamodb"]["SequenceNumber"]
        return {"partition": f"{record['topic']}-{record['partition']}", "offset": record["offset"]}

    def done(self) -> bool:
        return all(shard.done() for shard in self.shards.values())

    def poll(self, invoke: Invoke) -> None:
        """One round: Kinesis and DynamoDB Streams invoke once per shard; Kafka once with a
        batch from every partition that has records left."""
        if self.source == "kafka":
            batches = {
                n: shard.records[shard.checkpoint : shard.checkpoint + self.batch_size]
                for n, shard in self.shards.items()
                if not shard.done()
            }
            if batches:
                records = [r for batch in batches.values() for r in batch]
                response = self._invoke(invoke, kafka_event(*records))
                for n, batch in batches.items():
                    self._advance(self.shards[n], batch, response)
            return
        for shard in self.shards.values():
            if shard.done():
                continue
            batch = shard.records[shard.checkpoint : shard.checkpoint + self.batch_size]
            self._advance(shard, batch, self._invoke(invoke, records_event(*batch)))

    def _invoke(self, invoke: Invoke, event: dict[str, Any]) -> dict[str, Any]:
        self.invocations += 1
        return invoke(event)

    def _advance(self, shard: Shard, batch: list[dict[str, Any]], response: dict[str, Any]) -> None:
        start = shard.checkpoint
        positions = shard.positions[start : start + len(batch)]
        named = [item.get("itemIdentifier") for item in response.get("batchItemFailures", [])]
        if self.source == "kafka":
            mine = {p["partition"] for p in positions}
            named = [n for n in named if not isinstance(n, dict) or n.get("partition") in mine]
        if not named:
            shard.checkpoint = start + len(batch)
            return
        found = [positions.index(n) for n in named if n in positions]
        if len(found) < len(named):  # "" or an unknown identifier: the batch fails whole
            return
        shard.checkpoint = start + min(found)

    def run(self, invoke: Invoke, rounds: int) -> int:
        """Poll until every shard is past its last record or `rounds` run out; the rounds
        left."""
        while rounds > 0 and not self.done():
            self.poll(invoke)
            rounds -= 1
        return rounds


def message_id(position: Any) -> str:
    """The message id the consumer gives a record at `position` (streams/records.py)."""
    if isinstance(position, dict):
        return f"{position['partition']}:{position['offset']}"
    return str(position)


def verdict(plan: list[Planned], effects: Effects, *, complete: bool = True) -> list[str]:
    """What is wrong with a run: a key whose effect happened twice (a double), a key never
    done (lost, when `complete`), an effect ran by a later put than the key's first in its
    shard, or a shard whose effects ran out of sequence order. Empty: exactly once, in order."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    for key, _, _ in effects.done:
        seen[key] = seen.get(key, 0) + 1
    problems += [f"double: {key} ran {n} times" for key, n in sorted(seen.items()) if n > 1]
    if complete:
        problems += [f"lost: {key}" for key in sorted({p.key for p in plan} - set(seen))]
    last: dict[int, int] = {}
    for key, shard, index in effects.done:
        if index < last.get(shard, -1):
            problems.append(f"order: shard {shard} ran {key}@{index} after @{last[shard]}")
        last[shard] = max(index, last.get(shard, -1))
    firsts: dict[tuple[int, str], int] = {}
    for p in sorted(plan, key=lambda p: p.index, reverse=True):
        firsts[(p.shard, p.key)] = p.index
    for key, shard, index in effects.done:
        first = firsts.get((shard, key))
        if first is not None and first != index and seen[key] == 1:
            problems.append(f"order: {key} ran at its put @{index}, not its first @{first}")
    return problems
