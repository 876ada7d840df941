"""A stream consumer on the PostgreSQL store (`dsn=`), writing its business row in the record's
own transaction (`ctx.transaction`), redelivered from the checkpoint as Lambda's mapping does
(tests/streams/mapping.py): one row per key, whatever failed on the way. A real server
(tests/conftest.py's), with faults at the driver's edge (fault_injection/pg_faults.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from exactly_once import RecordContext
from exactly_once.streams import stream_consumer
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.conftest import FakeClock
from tests.stores.pg_support import business_table, faulty_store, table_rows
from tests.streams.mapping import Mapping, Planned

# Kafka partitions 0 and 1, with keys put twice (a producer's retry) and one key in both.
PLAN = [
    Planned(0, 0, "o1"),
    Planned(0, 1, "o2"),
    Planned(0, 2, "o1"),
    Planned(0, 3, "o3"),
    Planned(1, 0, "o4"),
    Planned(1, 1, "o2"),
    Planned(1, 2, "o5"),
    Planned(1, 3, "o5"),
]


@pytest.mark.parametrize("source", ["kinesis", "kafka"])
def test_a_redelivered_stream_writes_one_business_row_per_key(
    source: str, pg_dsn: str, scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """o3 fails twice (its shard stops at it and resumes there); o2's first commit fails (its
    row rolled back with it); o4's commit is applied but its reply lost. Then the whole stream
    comes again from the start (a bisect, a replay from TRIM_HORIZON): every record meets its
    key COMPLETED."""
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)
    table = business_table(pg_dsn, "order_id text, seq text")
    fails = {"o3": 2}
    mapping = Mapping(source, PLAN, batch_size=3)

    def handler(payload: Any, ctx: RecordContext) -> str:
        key = str(payload["orderId"])
        if fails.get(key, 0) > 0:
            fails[key] -= 1
            raise TimeoutError(f"transient failure of {key}")
        ctx.transaction.execute(
            f"INSERT INTO {table} (order_id, seq) VALUES (%s, %s)",  # noqa: S608
            (key, ctx.message_id),
        )
        return key

    consumer = stream_consumer(
        key="orderId", dsn=pg_dsn, scope=scope, fingerprint=False, concurrency=2
    )(handler)
    # The plan is per statement kind, in order: o1's completion goes through, o2's first
    # fails, o4's (partition 1 runs on its own thread in Kafka; Kinesis runs shards in turn)
    # is applied with its reply lost -- the order of the store's completions decides which key
    # meets which fault, so the test asserts the end state, not which key met which.
    store, pool = faulty_store(pg_dsn, FakeClock(time.time()), {"complete": [None, "fail", "lose"]})
    consumer.processor().store = store

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        return consumer(event, LocalLambdaContext("stream-pg", timeout_s=60))

    mapping.run(invoke, rounds=20)
    assert mapping.done()
    assert pool.injected == {("complete", "fail"): 1, ("complete", "lose"): 1}
    rows = table_rows(pg_dsn, table)
    assert sorted(key for key, _ in rows) == ["o1", "o2", "o3", "o4", "o5"]

    replay = Mapping(source, PLAN, batch_size=8)
    replay.run(invoke, rounds=3)
    assert replay.done()
    assert table_rows(pg_dsn, table) == rows  # nothing ran twice
