"""Warm DynamoDB Local's JVM before measuring anything.

A cold JVM serves its first few thousand requests several times slower, and concurrent
requests (the layer's) suffer more than sequential ones, so measuring cold would mostly
measure the JIT compiler. Both consumers' request shapes are replayed, without the injected
latency, for a fixed time budget.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from benchmarks.business import make_work
from benchmarks.rig import VARIANTS, Rig
from benchmarks.settings import invocation_context
from benchmarks.sqs_events import new_batch


def warm_up(rig: Rig, seconds: float) -> int:
    """Run both consumers (new records, then the same again as duplicates); return batches run."""
    consumers = [rig.consumer(v, make_work(0), latency=False) for v in VARIANTS]
    deadline = time.monotonic() + seconds
    batches = 0
    while time.monotonic() < deadline:
        for consumer in consumers:
            batch = new_batch(10)
            consumer(batch, invocation_context())
            consumer(batch, invocation_context())
            batches += 2
    return batches


def local_round_trip_s(rig: Rig, calls: int = 60, concurrency: int = 1) -> float:
    """Median seconds of a consistent GetItem on the warm server, no latency injected.

    The injected latency is added on top of this, so the report states it, alone and with
    `concurrency` requests in flight at once (as the layer sends them).
    """
    client = rig.client("dynamodb", latency=False)

    def one(_: int) -> float:
        started = time.perf_counter()
        client.get_item(
            TableName=rig.powertools_table, Key={"id": {"S": "absent"}}, ConsistentRead=True
        )
        return time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return statistics.median(pool.map(one, range(calls)))
