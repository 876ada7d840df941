"""The example's service, run by the tests in-process or as a process that crashes on purpose.

`python -m tests.examples.order_service` reads its settings from the environment (those of
examples/kafka_order_processor/service.py, plus SCOPE, EXPECT, CRASH_AT, CRASH_OFFSET and
UNGUARDED) and ends the process with `os._exit` at the planned point: no `finally`, no
`close()`, no LeaveGroup, as a kill would. The group only learns of it when the member's
session times out, and the next member resumes from the last committed offset.
"""

from __future__ import annotations

import os
from typing import Any

from confluent_kafka import Consumer

from examples.kafka_order_processor.consumer import Progress, run
from examples.kafka_order_processor.processor import KafkaMessage, OrderProcessor, Outcome
from examples.kafka_order_processor.service import consumer_settings

CRASHED = 70  # the exit status of a planned crash

TEST_SETTINGS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


class UnguardedProcessor(OrderProcessor):
    """The processor with `once` bypassed: the order is written and committed at once. Only
    to prove that the tests' verdict bites: with it, a redelivery writes the order twice."""

    def process(self, message: KafkaMessage) -> Outcome:
        import psycopg

        from examples.kafka_order_processor.orders import read_order

        order = read_order(message.value())
        with psycopg.connect(self.store.conninfo) as conn:
            self.write_order(conn, message, order)
        return Outcome.WRITTEN


class CrashBeforeEffect:
    """Dies when handed the planned record, before anything of it is written."""

    def __init__(self, processor: OrderProcessor, offset: int) -> None:
        self.processor, self.offset = processor, offset

    def process(self, message: KafkaMessage) -> Outcome:
        if message.offset() == self.offset:
            os._exit(CRASHED)
        return self.processor.process(message)


class CrashBeforeCommit:
    """Dies when asked to commit the planned record's offset: its order is written and its key
    COMPLETED in PostgreSQL, and Kafka never hears of it."""

    def __init__(self, consumer: Consumer, offset: int) -> None:
        self.consumer, self.offset = consumer, offset

    def poll(self, timeout: float = -1) -> Any:
        return self.consumer.poll(timeout)

    def commit(self, *, message: Any, asynchronous: bool = False) -> Any:
        if message.offset() == self.offset:
            os._exit(CRASHED)
        return self.consumer.commit(message=message, asynchronous=False)


def processor_from(env: dict[str, str], name: str) -> OrderProcessor:
    kind = UnguardedProcessor if env.get("UNGUARDED") == "1" else OrderProcessor
    return kind(env["IDEMPOTENCY_DSN"], schema=env["ORDERS_SCHEMA"], scope=env["SCOPE"], name=name)


def serve(env: dict[str, str], name: str) -> Progress:
    """Consume until EXPECT records are committed, crashing where CRASH_AT says."""
    consumer = Consumer(
        consumer_settings(env["KAFKA_BOOTSTRAP_SERVERS"], env["CONSUMER_GROUP"], **TEST_SETTINGS)
    )
    consumer.subscribe([env["ORDERS_TOPIC"]])
    processor: Any = processor_from(env, name)
    client: Any = consumer
    crash_at, offset = env.get("CRASH_AT"), int(env.get("CRASH_OFFSET", "-1"))
    if crash_at == "before_effect":
        processor = CrashBeforeEffect(processor, offset)
    elif crash_at == "after_effect":
        client = CrashBeforeCommit(consumer, offset)
    expected = int(env["EXPECT"])
    try:
        return run(client, processor, stop=lambda progress: len(progress.outcomes) >= expected)
    finally:
        consumer.close()


if __name__ == "__main__":
    serve(dict(os.environ), name="crashing")
