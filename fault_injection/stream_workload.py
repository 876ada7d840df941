"""Plan a Kinesis chaos run from the seed: records, partition keys, producer retries, poison.

The queue run's plan (workload.plan_run) decides the bodies, the duplicates and which faults
each body carries, so both runs meet faults the same way. A stream adds two things:

* a partition key per order (a customer), the same for every copy of it, so the copies of one
  order land in one shard and its effects can be ordered against that shard's other records;
  a duplicate is a producer's retry (the same data put again, a new sequence number, later in
  the shard);
* the crash after completion sits before the checkpoint (a stream has no delete): the batch is
  read again from the last checkpoint by whoever takes the shard next.

Plus one hostile payload of its own: data that is not UTF-8 (a stream carries bytes).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

from fault_injection import injection
from fault_injection.settings import ChaosSettings, FaultRates
from fault_injection.workload import Kind, plan_run

BEFORE_CHECKPOINT = "before-checkpoint"  # the batch is done, its checkpoint not yet written
CRASH_POINTS = (injection.BEFORE_EFFECT, injection.AFTER_EFFECT, BEFORE_CHECKPOINT)
PAUSE_POINTS = injection.PAUSE_POINTS
CUSTOMERS = 64  # partition keys: spread over every shard by Kinesis's hash of the key


class RecordKind(StrEnum):
    VALID = "valid"
    DUPLICATE = "producer retry"
    BAD_JSON = "poison: not JSON"
    BAD_AMOUNT = "poison: negative amount"
    NO_KEY = "poison: no orderId"
    NOT_UTF8 = "poison: not UTF-8"

    @property
    def poison(self) -> bool:
        return self not in (RecordKind.VALID, RecordKind.DUPLICATE)


_FROM_QUEUE = {
    Kind.VALID: RecordKind.VALID,
    Kind.DUPLICATE: RecordKind.DUPLICATE,
    Kind.BAD_JSON: RecordKind.BAD_JSON,
    Kind.BAD_AMOUNT: RecordKind.BAD_AMOUNT,
    Kind.NO_KEY: RecordKind.NO_KEY,
}


@dataclass(frozen=True)
class PlannedRecord:
    data: bytes
    partition_key: str
    kind: RecordKind
    key: str | None = None  # the orderId, when the data has one


@dataclass
class StreamPlan:
    records: list[PlannedRecord] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)  # each must take effect exactly once
    faults: Counter[str] = field(default_factory=Counter)

    @property
    def poison(self) -> int:
        return sum(r.kind.poison for r in self.records)

    @property
    def duplicates(self) -> int:
        return sum(r.kind is RecordKind.DUPLICATE for r in self.records)


@dataclass(frozen=True)
class KinesisSettings:
    records: int = 3_000
    rates: FaultRates = field(default_factory=FaultRates)
    seed: int = 7
    workers: int = 3  # poller processes sharing the shards through leases
    shards: int = 4
    batch_size: int = 25  # records per invocation (the mapping's BatchSize)
    work_ms: int = 5
    function_timeout_s: float = 3.0  # each invocation's deadline; the key's lease follows it
    lease_margin_ms: int = 1_000
    shard_lease_s: float = 6.0  # a silent poller loses its shards after this
    pause_s: float | None = None  # zombie pause; None: past the shard lease and the key lease
    drain_timeout_s: float = 600.0
    lock_off: bool = False

    def __post_init__(self) -> None:
        if self.records < 1 or self.workers < 1 or self.shards < 1 or self.batch_size < 1:
            raise ValueError("records, workers, shards and batch_size must be at least 1")

    @property
    def zombie_pause_s(self) -> float:
        """Longer than a shard lease plus a key's lease (timeout + margin): by the time a zombie
        wakes, its shard has moved to another poller and its key has been taken over."""
        if self.pause_s is not None:
            return self.pause_s
        return self.shard_lease_s + self.function_timeout_s + self.lease_margin_ms / 1000 + 3.0

    def queue_settings(self) -> ChaosSettings:
        return ChaosSettings(
            messages=self.records, rates=self.rates, seed=self.seed, work_ms=self.work_ms
        )


def plan_stream(settings: KinesisSettings) -> StreamPlan:
    queue_plan = plan_run(settings.queue_settings())
    rng = random.Random(f"{settings.seed}/partition-keys")
    customer: dict[str, str] = {}
    plan = StreamPlan(keys=set(queue_plan.keys))
    for fault, count in queue_plan.faults.items():
        plan.faults[fault.replace(injection.BEFORE_DELETE, BEFORE_CHECKPOINT)] += count
    bad_json = 0
    for message in queue_plan.messages:
        kind = _FROM_QUEUE[message.kind]
        data = _stream_body(message.body).encode("utf-8")
        if kind is RecordKind.BAD_JSON:
            bad_json += 1
            if bad_json % 2 == 0:  # every second unparseable record is not even text
                kind, data = RecordKind.NOT_UTF8, b"\xff\xfe order %d \x80" % bad_json
        if message.key is not None:
            partition_key = customer.setdefault(message.key, f"customer-{rng.randrange(CUSTOMERS)}")
        else:
            partition_key = f"customer-{rng.randrange(CUSTOMERS)}"
        plan.records.append(PlannedRecord(data, partition_key, kind, message.key))
    return plan


def _stream_body(body: str) -> str:
    """The queue plan's body, its crash after completion moved to before the checkpoint."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return body
    if isinstance(parsed, dict) and parsed.get("crash") == injection.BEFORE_DELETE:
        parsed["crash"] = BEFORE_CHECKPOINT
        return json.dumps(parsed)
    return body
