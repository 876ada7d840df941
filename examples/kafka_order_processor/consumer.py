"""The consumer loop: poll, process, and commit a record's offset only after its key is complete.

The loop speaks the interface of confluent_kafka.Consumer (`poll`, `commit(message=...,
asynchronous=False)`) and its Message accessors, so the real client is passed in as it is
(service.py); the tests pass the same client, connected to a real broker.

Why the commit comes last: Kafka redelivers from a group's last committed offset after a crash
or a rebalance. Commit before the order is written and a crash in between loses the order;
commit after it and a crash in between redelivers it, which `once` turns into a DUPLICATE. So
the offset of a record is committed, synchronously, only when the processor answers WRITTEN,
DUPLICATE or DEAD_LETTER. On RETRY (another consumer holds the key, as after a rebalance) the
loop processes the same record again after a pause, in place: a later offset is never
committed past it, which would commit it too. Past `max_wait_s` it raises `Stuck`: the process
stops without committing, and the record is redelivered to whoever holds the partition next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from examples.kafka_order_processor.processor import KafkaMessage, Outcome, position


class Message(KafkaMessage, Protocol):
    def error(self) -> Any: ...


class Consumer(Protocol):
    """What the loop calls on confluent_kafka.Consumer."""

    def poll(self, timeout: float = ...) -> Any: ...
    def commit(self, *, message: Any, asynchronous: Literal[False]) -> Any: ...


class Processor(Protocol):
    def process(self, message: KafkaMessage) -> Outcome: ...


class Stuck(RuntimeError):
    """A record could not be completed within `max_wait_s`; its offset is not committed."""


@dataclass
class Progress:
    """What a run did, record by record (for logs and the tests)."""

    outcomes: list[tuple[str, Outcome]] = field(default_factory=list)
    retries: int = 0

    def of(self, outcome: Outcome) -> list[str]:
        return [where for where, seen in self.outcomes if seen is outcome]


def run(
    consumer: Consumer,
    processor: Processor,
    *,
    stop: Callable[[Progress], bool] = lambda progress: False,
    poll_timeout_s: float = 0.5,
    retry_pause_s: float = 0.5,
    max_wait_s: float = 60.0,
) -> Progress:
    """Consume until `stop(progress)` is true (checked after every poll)."""
    progress = Progress()
    while not stop(progress):
        message = consumer.poll(poll_timeout_s)
        if message is None:
            continue
        if message.error() is not None:  # a broker or partition event, not a record
            continue
        outcome = _complete(message, processor, progress, retry_pause_s, max_wait_s)
        consumer.commit(message=message, asynchronous=False)  # only now: the key is complete
        progress.outcomes.append((position(message), outcome))
    return progress


def _complete(
    message: Message,
    processor: Processor,
    progress: Progress,
    pause_s: float,
    max_wait_s: float,
) -> Outcome:
    """The record's outcome once it is one that may be committed."""
    deadline = time.monotonic() + max_wait_s
    while True:
        try:
            outcome = processor.process(message)
        except Exception as exc:  # the database away: the key is retryable, try again
            if time.monotonic() >= deadline:
                raise Stuck(f"{position(message)}: {exc!r}") from exc
        else:
            if outcome is not Outcome.RETRY:
                return outcome
            if time.monotonic() >= deadline:
                raise Stuck(f"{position(message)} is still held by another consumer")
        progress.retries += 1
        time.sleep(pause_s)
