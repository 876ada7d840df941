"""`make run`'s stream part: orders put to a Kinesis stream with the duplicates streams cause.

A stream has no message id to deduplicate on: a producer that retries a PutRecord whose answer
it lost writes the same order again, as a new record with a new sequence number. This workload
does that on purpose (the same order put twice, the copy a few records behind), makes some
orders fail once (`failTimes`: the shard stops there and the mapping retries from it), and puts
poison: a record that is not JSON and an order with a negative amount (PermanentError). Orders
belong to customers, the partition keys: a customer's orders are on one shard, in the order put,
and must take effect in that order. Every valid order must be in the ledger exactly once, and
each poison record in the consumer's DLQ with its reason.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from exactly_once_ops.local_state import utc_now

PUT_CHUNK = 100  # records per PutRecords call (Kinesis takes up to 500)
RETRY_SPREAD = 4  # a re-put order lands 0 to 3 records behind its original


@dataclass(frozen=True)
class StreamWorkload:
    orders: int = 60  # records put in total
    duplicate_ratio: float = 0.25  # share that puts an earlier order again (a producer retry)
    poison: int = 2  # records that can never succeed (not JSON, then a negative amount)
    transient_ratio: float = 0.05  # share of unique orders that fail once, then succeed
    customers: int = 4  # partition keys
    work_ms: int = 20
    seed: int = 7


@dataclass(frozen=True)
class StreamRecordOut:
    data: bytes
    partition_key: str


@dataclass
class StreamPlan:
    records: list[StreamRecordOut] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)  # each must take effect exactly once
    # per customer, its orders in the order first put: the order they must take effect in
    order_by_customer: dict[str, list[str]] = field(default_factory=dict)
    duplicates: int = 0
    poison: int = 0


def plan_stream(workload: StreamWorkload, run_id: str, rng: random.Random) -> StreamPlan:
    poison = min(workload.poison, workload.orders)
    duplicates = min(round(workload.orders * workload.duplicate_ratio), workload.orders - poison)
    unique = workload.orders - poison - duplicates
    plan = StreamPlan(duplicates=duplicates, poison=poison)
    customers = max(1, workload.customers)
    originals: list[StreamRecordOut] = []
    for n in range(unique):
        customer = f"customer-{n % customers}"
        order: dict[str, Any] = {"orderId": f"k-{run_id}-{n}", "amount": 1 + n % 97}
        order["customerId"] = customer
        order["workMs"] = workload.work_ms
        if rng.random() < workload.transient_ratio:
            order["failTimes"] = 1
        originals.append(StreamRecordOut(json.dumps(order).encode(), customer))
        plan.keys.add(order["orderId"])
        plan.order_by_customer.setdefault(customer, []).append(order["orderId"])
    records = list(originals)
    for _ in range(duplicates if originals else 0):
        # a producer's retry: the same record again, right behind it or a few records later
        # (a PutRecord whose answer was lost is retried soon), never before it
        copy = rng.randrange(len(originals))
        after = records.index(originals[copy])
        records.insert(min(len(records), after + 1 + rng.randrange(RETRY_SPREAD)), originals[copy])
    for n in range(poison):
        data = (
            f"order {run_id}-{n}: amount=12 (not JSON)".encode()
            if n % 2 == 0
            else json.dumps({"orderId": f"bad-{run_id}-{n}", "amount": -1}).encode()
        )
        records.insert(rng.randint(0, len(records)), StreamRecordOut(data, f"customer-{n}"))
    plan.records = records
    return plan


@dataclass(frozen=True)
class SentStreamWorkload:
    run_id: str
    consumer: str
    stream_name: str
    put: int  # records put
    duplicates: int  # orders put a second time
    poison: int
    expected_keys: list[str]
    order_by_customer: dict[str, list[str]]
    shards: int
    throughput: float
    finished_at: float  # epoch seconds: every record was in the stream by then
    sent_at: str = ""


class PutFailed(RuntimeError):
    """Kinesis refused some of the workload's records."""


def put_stream_workload(
    kinesis: Any, consumer: str, stream_name: str, workload: StreamWorkload
) -> SentStreamWorkload:
    """Plan the orders (fresh keys) and put them, in order, with PutRecords."""
    rng = random.Random(workload.seed)
    run_id = uuid.uuid4().hex[:6]
    plan = plan_stream(workload, run_id, rng)
    started = time.monotonic()
    for start in range(0, len(plan.records), PUT_CHUNK):
        chunk = plan.records[start : start + PUT_CHUNK]
        answer = kinesis.put_records(
            StreamName=stream_name,
            Records=[{"Data": r.data, "PartitionKey": r.partition_key} for r in chunk],
        )
        if answer.get("FailedRecordCount"):
            raise PutFailed(f"{answer['FailedRecordCount']} records refused by {stream_name}")
    elapsed = time.monotonic() - started
    shards = len(kinesis.list_shards(StreamName=stream_name)["Shards"])
    return SentStreamWorkload(
        run_id=run_id,
        consumer=consumer,
        stream_name=stream_name,
        put=len(plan.records),
        duplicates=plan.duplicates,
        poison=plan.poison,
        expected_keys=sorted(plan.keys),
        order_by_customer=plan.order_by_customer,
        shards=shards,
        throughput=len(plan.records) / elapsed if elapsed > 0 else 0.0,
        finished_at=time.time(),
        sent_at=utc_now(),
    )
