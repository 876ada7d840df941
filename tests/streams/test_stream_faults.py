"""The stream path under DynamoDB faults, through botocore's `before-send` hook on a client of
the test's own (tests/store/test_write_faults.py's style), against DynamoDB Local:

- a wave's batched acquire (PartiQL BatchExecuteStatement) applied, its reply lost and retried;
- the acquire throttled past botocore's retries, single-call fallbacks too;
- the wave's gathered completion failing for one record (its batch write and its own fallback
  write): the shard stops at it, the response names it, and redelivery runs nothing twice.

Redelivery goes through the mapping stand-in (tests/streams/mapping.py), which resumes at the
lowest position named, as Lambda's does.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from botocore.httpsession import URLLib3Session

from exactly_once import LeasePolicy, Outcome, RecordContext
from exactly_once.effects import put_once
from exactly_once.stores import schema
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.streams import StreamConsumer, stream_consumer
from exactly_once_ops.lambda_context import LocalLambdaContext
from fault_injection.throttling import error_response, throttle_response
from tests.conftest import FakeClock, make_ddb_client
from tests.streams.mapping import Effects, Mapping, Planned, verdict

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

Decide = Callable[[str, bytes], str | None]
"""(operation, request body) -> "lost" | "throttle" | None (let it through)."""


def operation_of(request: Any) -> str:
    target = request.headers.get("X-Amz-Target", b"")
    name = target.decode() if isinstance(target, bytes) else str(target)
    return name.rsplit(".", 1)[-1]


def is_acquire(body: bytes) -> bool:
    """A batched acquire INSERTs new keys or UPDATEs taken ones RETURNING the old item; a
    batched finish is a plain fenced UPDATE."""
    return b"INSERT INTO" in body or b"RETURNING" in body


@dataclass
class Faults:
    """Injects what `decide` says into the client's requests; counts what it injected."""

    decide: Decide
    hits: list[tuple[str, str]] = field(default_factory=list)
    armed: bool = True
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def install(self, client: DynamoDBClient) -> None:
        session = URLLib3Session()

        def before_send(request: Any, **_: Any) -> Any:
            if not self.armed:
                return None
            operation = operation_of(request)
            body = request.body if isinstance(request.body, bytes) else b""
            kind = self.decide(operation, body)
            if kind is None:
                return None
            with self._guard:
                self.hits.append((operation, kind))
            if kind == "throttle":
                return throttle_response(str(request.url))
            session.send(request)  # applied; its reply never arrives
            return error_response(str(request.url), 500, b'{"__type": "InternalServerError"}')

        client.meta.events.register("before-send.dynamodb", before_send)


@pytest.fixture
def client(dynamodb_local: DynamoDBLocal) -> DynamoDBClient:
    """The consumer's own client (2 attempts a call), so hooks never reach the session's."""
    return make_ddb_client(dynamodb_local.endpoint, max_attempts=2)


class Recorder:
    """The handler: its effect is a fenced put (put_once) into an effects table keyed by the
    order, and the runs are counted, in the order they happened."""

    def __init__(self, where: dict[str, tuple[int, int]], table: str | None = None) -> None:
        self.where = where
        self.table = table
        self.effects = Effects()
        self.runs: list[str] = []

    def __call__(self, payload: Any, ctx: RecordContext) -> str:
        key = str(payload["orderId"])
        self.runs.append(key)
        if self.table is not None:
            put_once(ctx, self.table, {"pk": {"S": key}, "sk": {"S": "effect"}})
        shard, index = self.where[ctx.message_id]
        self.effects.add(key, shard, index)
        return key


def consumer_for(
    client: DynamoDBClient, table: str, handler: Recorder, **kw: Any
) -> StreamConsumer:
    return stream_consumer(
        key="orderId",
        table_name=table,
        scope=f"faults-{uuid.uuid4().hex[:12]}",
        dynamodb_client=client,
        concurrency=1,
        **kw,
    )(handler)


def invoker(consumer: StreamConsumer, responses: list[dict[str, Any]]) -> Any:
    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        response = consumer(event, LocalLambdaContext("stream-faults", timeout_s=60))
        responses.append(response)
        return response

    return invoke


PLAN = [Planned(0, n, f"o{n}") for n in range(6)]


def test_a_lost_reply_to_the_waves_acquire_is_retried_and_each_record_runs_once_in_order(
    client: DynamoDBClient, idempotency_table: str
) -> None:
    faults = Faults(
        lambda op, body: "lost" if op == "BatchExecuteStatement" and is_acquire(body) else None
    )
    faults.install(client)
    mapping = Mapping("kinesis", PLAN, batch_size=6)
    handler = Recorder(mapping.where)
    responses: list[dict[str, Any]] = []
    mapping.run(invoker(consumer_for(client, idempotency_table, handler), responses), rounds=5)
    assert faults.hits
    assert set(faults.hits) == {("BatchExecuteStatement", "lost")}
    assert mapping.done()
    assert verdict(PLAN, handler.effects) == []
    assert handler.runs == [f"o{n}" for n in range(6)]  # nothing ran twice, nothing held


def test_an_acquire_throttled_past_retries_stops_the_shard_at_its_first_record_and_loses_none(
    client: DynamoDBClient, idempotency_table: str
) -> None:
    """Every write throttled in the first invocation (the batch and the single-call
    fallbacks): nothing runs, the response names the shard's first record, and the next
    delivery runs each record once, in order."""
    faults = Faults(lambda op, body: "throttle" if op != "GetItem" else None)
    faults.install(client)
    mapping = Mapping("kinesis", PLAN, batch_size=6)
    handler = Recorder(mapping.where)
    responses: list[dict[str, Any]] = []
    consumer = consumer_for(client, idempotency_table, handler)
    mapping.poll(invoker(consumer, responses))
    assert faults.hits
    first = mapping.shards[0].positions[0]
    assert responses == [{"batchItemFailures": [{"itemIdentifier": first}]}]
    assert handler.runs == []
    assert consumer.last_results[0].outcome is Outcome.ERROR
    assert {r.outcome for r in consumer.last_results[1:]} == {Outcome.SKIPPED}
    faults.armed = False
    mapping.run(invoker(consumer, responses), rounds=3)
    assert mapping.done()
    assert handler.runs == [f"o{n}" for n in range(6)]
    assert verdict(PLAN, handler.effects) == []


def record_id_in(body: bytes, record_id: str) -> bool:
    return json.dumps(record_id).encode()[1:-1] in body


def test_a_failed_gathered_completion_stops_the_shard_at_it_and_redelivery_runs_nothing_twice(
    client: DynamoDBClient, ddb: DynamoDBClient, idempotency_table: str, ledger_table: str
) -> None:
    """o2's completion fails (the wave's batched finish, then o2's own UpdateItem): o2 stays
    IN_PROGRESS and the response names it, though o3..o5 ran after it in the same wave and
    completed. Redelivered from o2: o2 is held (its lease) and stops the shard again; past
    its lease it is taken over and runs again, but its fenced effect does not repeat; o3..o5
    are duplicates. Each effect once; each key's first run in sequence order."""
    mapping = Mapping("kinesis", PLAN, batch_size=6)
    handler = Recorder(mapping.where, ledger_table)
    consumer = consumer_for(
        client, idempotency_table, handler, lease=LeasePolicy(default_ms=30_000, heartbeat_ms=None)
    )
    scope = consumer.processor().config.scope
    failing = schema.record_id(scope, "o2")

    def decide(op: str, body: bytes) -> str | None:
        if op == "BatchExecuteStatement" and not is_acquire(body):
            return "throttle"  # the wave's gathered finish
        if op == "UpdateItem" and record_id_in(body, failing) and b"COMPLETED" in body:
            return "throttle"  # o2's own completion, the fallback
        return None

    faults = Faults(decide)
    faults.install(client)
    responses: list[dict[str, Any]] = []
    invoke = invoker(consumer, responses)
    mapping.poll(invoke)
    o2 = mapping.shards[0].positions[2]
    assert set(faults.hits) == {("BatchExecuteStatement", "throttle"), ("UpdateItem", "throttle")}
    assert responses[-1] == {"batchItemFailures": [{"itemIdentifier": o2}]}
    assert handler.runs == [f"o{n}" for n in range(6)]  # the wave ran before its write failed
    outcomes = [r.outcome for r in consumer.last_results]
    assert outcomes[2] is Outcome.ERROR
    assert outcomes[:2] + outcomes[3:] == [Outcome.PROCESSED] * 5
    faults.armed = False

    mapping.poll(invoke)  # o2 is still held by the lease of the invocation that ran it
    assert responses[-1] == {"batchItemFailures": [{"itemIdentifier": o2}]}
    assert consumer.last_results[0].outcome is Outcome.IN_PROGRESS
    assert handler.runs == [f"o{n}" for n in range(6)]

    clock = FakeClock(start=time.time() + 120)  # past o2's 30 s lease
    consumer.processor().store = IdempotencyStore(idempotency_table, client=client, clock=clock)
    mapping.run(invoke, rounds=3)
    assert mapping.done()
    assert handler.runs == [f"o{n}" for n in range(6)] + ["o2"]  # o2 taken over, once
    assert [r.outcome for r in consumer.last_results] == [Outcome.PROCESSED] + [
        Outcome.DUPLICATE
    ] * 3
    effects = ddb.scan(TableName=ledger_table, ConsistentRead=True)["Items"]
    assert sorted(item["pk"]["S"] for item in effects) == [f"o{n}" for n in range(6)]
