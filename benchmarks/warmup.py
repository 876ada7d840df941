"""Warm DynamoDB Local's JVM before measuring anything.

A cold JVM serves its first few thousand requests several times slower, and concurrent
requests (the layer's) suffer more than sequential ones, so measuring cold would mostly
measure the JIT compiler. Both consumers' request shapes are replayed, without the injected
latency, for a fixed time budget.
"""

from __future__ import annotations

import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.business import make_work
from benchmarks.rig import VARIANTS, Rig
from benchmarks.settings import invocation_context
from benchmarks.sqs_events import new_batch
from exactly_once.stores import schema


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


def batch_round_trip_s(rig: Rig, calls: int = 30, size: int = 10) -> float:
    """Median seconds of the two requests a batch of `size` new records cannot do without, sent
    bare on the warm server with no injected latency: a `BatchExecuteStatement` of `size` INSERTs
    of a new record's attributes, then one of `size` conditional UPDATEs completing them (the
    fenced completion's shape). The mean of the two medians is one round trip of the I/O-bound
    batch's limit: DynamoDB Local runs a batch's statements one after another, so a batch takes
    it several times a `GetItem`'s time, and no client can send the two requests for less.
    """
    client = rig.client("dynamodb", latency=False)
    table = f'"{rig.layer_table}"'
    inserts, updates = [], []
    for _ in range(calls):
        ids = [f"bench-trip#{uuid.uuid4().hex}" for _ in range(size)]
        started = time.perf_counter()
        client.batch_execute_statement(Statements=[_insert(table, i) for i in ids])
        inserts.append(time.perf_counter() - started)
        started = time.perf_counter()
        client.batch_execute_statement(Statements=[_complete(table, i) for i in ids])
        updates.append(time.perf_counter() - started)
    return (statistics.median(inserts) + statistics.median(updates)) / 2


def _insert(table: str, record_id: str) -> Any:
    now = str(int(time.time() * 1000))
    attributes = [schema.STATUS, schema.LOCK_TOKEN, schema.LEASE_EXPIRES_AT, schema.OWNER]
    attributes += [schema.CREATED_AT, schema.UPDATED_AT, schema.TTL, schema.PENDING_SHARD]
    attributes += [schema.PENDING_AT, schema.FENCE]
    values: list[dict[str, str]] = [
        {"S": "IN_PROGRESS"},
        {"S": "t"},
        {"N": now},
        {"S": "bench"},
        {"N": now},
        {"N": now},
        {"N": now[:-3]},
        {"S": "IN_PROGRESS#0"},
        {"N": now},
        {"N": now},
    ]
    names = [schema.PARTITION_KEY, *attributes, schema.ATTEMPTS]
    fields = ", ".join(f"'{name}': ?" for name in names)
    return {
        "Statement": f"INSERT INTO {table} VALUE {{{fields}}}",
        "Parameters": [{"S": record_id}, *values, {"N": "1"}],
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def _complete(table: str, record_id: str) -> Any:
    return {
        "Statement": (
            # The bench's own table name; every value is a parameter.
            f'UPDATE {table} SET "status" = ?, "updated_at" = ?, "expires_at" = ?, '  # noqa: S608
            '"result" = ? REMOVE "pending_shard" REMOVE "pending_at" '
            'WHERE "id" = ? AND ("lock_token" = ? AND "status" = ?)'
        ),
        "Parameters": [
            {"S": "COMPLETED"},
            {"N": "1"},
            {"N": "1"},
            {"S": "{}"},
            {"S": record_id},
            {"S": "t"},
            {"S": "IN_PROGRESS"},
        ],
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
