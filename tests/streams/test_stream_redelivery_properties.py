"""Ordering and exactly-once under redelivery, as properties: random shards (or Kafka
partitions) of records with repeated keys (a producer's retried put), a handler failing
transiently a random number of times per key, and a mapping (tests/streams/mapping.py) that
resumes each shard at the lowest position a response names, as Lambda's does.

Held to: each key's effect exactly once, at its first put in its shard; a shard's effects in
sequence order; every key done once failures stop. The same mapping shows the verdict bites: a
handler without the library doubles, and the library with its shard order switched off runs a
shard out of order. DynamoDB Local; each example has its own scope.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exactly_once import RecordContext
from exactly_once.sqs import waves
from exactly_once.streams import StreamConsumer, stream_consumer
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.streams.mapping import Effects, Mapping, Planned, verdict

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

SOURCES = ("kinesis", "dynamodb", "kafka")


class Failing:
    """The handler: fails each key's first `fails[key]` runs (transient: a timeout, a 503),
    then does its effect. Kafka runs partitions in parallel, hence the lock."""

    def __init__(self, fails: dict[str, int], where: dict[str, tuple[int, int]]) -> None:
        self.fails = dict(fails)
        self.where = where
        self.effects = Effects()
        self._guard = threading.Lock()

    def __call__(self, payload: Any, ctx: RecordContext) -> dict[str, Any]:
        key = str(payload["orderId"])
        with self._guard:
            failing = self.fails.get(key, 0) > 0
            if failing:
                self.fails[key] -= 1
        if failing:
            raise TimeoutError(f"transient failure of {key}")
        shard, index = self.where[ctx.message_id]
        self.effects.add(key, shard, index)
        return {"done": key}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Planned], dict[str, int], int]:
    keys = [f"k{n}" for n in range(draw(st.integers(1, 6)))]
    plan = [
        Planned(shard, index, draw(st.sampled_from(keys)))
        for shard in range(draw(st.integers(1, 3)))
        for index in range(draw(st.integers(0, 7)))
    ]
    fails = draw(st.dictionaries(st.sampled_from(keys), st.integers(0, 3)))
    return plan, fails, draw(st.integers(1, 6))


def consumer_for(ddb: DynamoDBClient, table: str, handler: Failing) -> StreamConsumer:
    return stream_consumer(
        key="orderId",
        table_name=table,
        scope=f"prop-{uuid.uuid4().hex[:12]}",
        dynamodb_client=ddb,
        concurrency=4,
    )(handler)


def invoker(consumer: StreamConsumer) -> Any:
    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        return consumer(event, LocalLambdaContext("stream-props", timeout_s=60))

    return invoke


def rounds_for(plan: list[Planned], fails: dict[str, int]) -> int:
    """Every failure costs its shard at most one more round; a clean round moves each shard a
    batch on."""
    return len(plan) + sum(fails.values()) + 3


@pytest.mark.parametrize("source", SOURCES)
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(scenario=scenarios())
def test_each_key_once_in_shard_order_and_nothing_lost_under_redelivery(
    source: str,
    scenario: tuple[list[Planned], dict[str, int], int],
    ddb: DynamoDBClient,
    idempotency_table: str,
) -> None:
    plan, fails, batch_size = scenario
    mapping = Mapping(source, plan, batch_size)
    handler = Failing(fails, mapping.where)
    left = mapping.run(
        invoker(consumer_for(ddb, idempotency_table, handler)), rounds_for(plan, fails)
    )
    assert mapping.done(), f"stuck with {left} rounds left: {mapping.shards}"
    assert verdict(plan, handler.effects) == []


# -- the verdict bites ----------------------------------------------------------------------

# Shard 0 puts o1 twice (a producer's retry); o1's first run fails once.
BITE_PLAN = [Planned(0, 0, "o0"), Planned(0, 1, "o1"), Planned(0, 2, "o2"), Planned(0, 3, "o1")]


def plain_handler(handler: Failing) -> Any:
    """A Kinesis handler without the library, as one writes it by hand (or with a batch
    utility): every record runs, each failure is reported, the mapping resumes at the lowest."""

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        failures: list[dict[str, Any]] = []
        for record in event["Records"]:
            try:
                sequence = record["kinesis"]["sequenceNumber"]
                payload = json.loads(base64.b64decode(record["kinesis"]["data"]))
                handler(payload, SimpleNamespace(message_id=sequence))  # type: ignore[arg-type]
            except TimeoutError:
                failures.append({"itemIdentifier": sequence})
        return {"batchItemFailures": failures}

    return invoke


def test_the_verdict_finds_the_doubles_of_a_handler_without_the_library() -> None:
    mapping = Mapping("kinesis", BITE_PLAN, batch_size=4)
    handler = Failing({"o1": 1}, mapping.where)
    mapping.run(plain_handler(handler), rounds=10)
    assert mapping.done()
    problems = verdict(BITE_PLAN, handler.effects)
    # o2 and o1's second put ran past o1's failure; the redelivery from o1 ran them again.
    assert problems == [
        "double: o1 ran 3 times",
        "double: o2 ran 2 times",
        "order: shard 0 ran o1@1 after @3",
        "order: shard 0 ran o2@2 after @3",
    ]


def test_the_verdict_finds_a_shard_run_out_of_order(
    ddb: DynamoDBClient, idempotency_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library with its shard chaining switched off (records chained by key, as on a
    standard queue): o2 runs past o1's failure, and o1's redelivery then runs after it."""
    mapping = Mapping("kinesis", BITE_PLAN, batch_size=4)
    handler = Failing({"o1": 1}, mapping.where)
    consumer = consumer_for(ddb, idempotency_table, handler)
    monkeypatch.setattr(
        waves, "chaining", lambda messages, key_of: (key_of, "an earlier message with its key")
    )
    mapping.run(invoker(consumer), rounds=10)
    assert mapping.done()
    assert verdict(BITE_PLAN, handler.effects) == ["order: shard 0 ran o1@1 after @2"]


def test_with_the_library_the_same_scenario_is_clean(
    ddb: DynamoDBClient, idempotency_table: str
) -> None:
    mapping = Mapping("kinesis", BITE_PLAN, batch_size=4)
    handler = Failing({"o1": 1}, mapping.where)
    mapping.run(invoker(consumer_for(ddb, idempotency_table, handler)), rounds=10)
    assert mapping.done()
    assert verdict(BITE_PLAN, handler.effects) == []
    assert [e[0] for e in handler.effects.done] == ["o0", "o1", "o2"]


@pytest.mark.parametrize("source", SOURCES)
@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    keys=st.lists(st.sampled_from([f"k{n}" for n in range(20)]), min_size=60, max_size=60),
    fails=st.dictionaries(st.sampled_from([f"k{n}" for n in range(20)]), st.integers(0, 2)),
)
def test_batches_of_several_waves_keep_order_and_exactly_once(
    source: str,
    keys: list[str],
    fails: dict[str, int],
    ddb: DynamoDBClient,
    idempotency_table: str,
) -> None:
    """Batches past one wave (sqs/waves.py WAVE = 25), where a repeated key holds the rest of
    its shard back to a later wave: two shards of 30 records, delivered 30 at a time."""
    plan = [Planned(n % 2, n // 2, key) for n, key in enumerate(keys)]
    mapping = Mapping(source, plan, batch_size=30)
    handler = Failing(fails, mapping.where)
    consumer = consumer_for(ddb, idempotency_table, handler)
    mapping.run(invoker(consumer), rounds_for(plan, fails))
    assert mapping.done()
    assert verdict(plan, handler.effects) == []
