"""Wall time per batch, both consumers interleaved (a, b, a, b, ...) in one process.

Every measured batch holds new business ids, so each record does its full work: lock, run,
complete. Each consumer is warmed up first, as a warm Lambda container would be.

Each record's business function is timed too, so a batch can be held against its limit: its
slowest record's business time plus the store's round trips (acquire the batch, complete it),
which no consumer can beat.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.business import make_work
from benchmarks.consumers import Consumer
from benchmarks.errors import BenchmarkInvalid
from benchmarks.rig import VARIANTS, Rig, Variant
from benchmarks.settings import invocation_context
from benchmarks.sqs_events import new_batch


@dataclass(frozen=True)
class Scenario:
    batch: int
    io_ms: float

    @property
    def label(self) -> str:
        kind = f"I/O-bound ({self.io_ms:g} ms)" if self.io_ms else "CPU-trivial"
        return f"{self.batch} records, {kind}"


# The layer's round trips per batch at best: one to acquire the batch's keys, one to complete them.
LIMIT_ROUND_TRIPS = 2


class TimedWork:
    """The business function, timing each of its runs (threads of one batch run it at once)."""

    def __init__(self, io_s: float) -> None:
        self._work = make_work(io_s)
        self._lock = threading.Lock()
        self._durations: list[float] = []

    def __call__(self, order: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        try:
            return self._work(order)
        finally:
            elapsed = time.perf_counter() - started
            with self._lock:
                self._durations.append(elapsed)

    def take(self) -> list[float]:
        """The durations since the last call, in seconds."""
        with self._lock:
            taken, self._durations = self._durations, []
        return taken


@dataclass
class WallResult:
    scenario: Scenario
    samples: dict[Variant, list[float]] = field(default_factory=dict)  # seconds per batch
    # seconds: each batch's slowest business function run, per consumer
    slowest: dict[Variant, list[float]] = field(default_factory=dict)

    def median(self, variant: Variant) -> float:
        return statistics.median(self.samples[variant])

    def limit(self, round_trip_s: float) -> float:
        """What the layer's batch cannot beat: its slowest record's business time (median over
        the batches) plus LIMIT_ROUND_TRIPS round trips of `round_trip_s` each."""
        return statistics.median(self.slowest[Variant.LAYER]) + LIMIT_ROUND_TRIPS * round_trip_s

    def over_limit(self, round_trip_s: float) -> float:
        """The layer's median batch over its limit (1 would be the limit itself)."""
        return self.median(Variant.LAYER) / self.limit(round_trip_s)

    @property
    def speedup(self) -> float:
        """How many times faster the layer is than Powertools (median over median)."""
        return self.median(Variant.POWERTOOLS) / self.median(Variant.LAYER)

    @property
    def paired_speedups(self) -> list[float]:
        """Each repetition's Powertools time over the layer's run just before it."""
        pairs = zip(self.samples[Variant.POWERTOOLS], self.samples[Variant.LAYER], strict=True)
        return [powertools / layer for powertools, layer in pairs]


def run_batch(consumer: Consumer, size: int) -> float:
    batch = new_batch(size)
    started = time.perf_counter()
    response = consumer(batch, invocation_context())
    elapsed = time.perf_counter() - started
    if response.get("batchItemFailures"):
        raise BenchmarkInvalid(f"a benchmark batch reported failures: {response}")
    return elapsed


def measure(rig: Rig, scenario: Scenario, repetitions: int) -> WallResult:
    works = {v: TimedWork(scenario.io_ms / 1000) for v in VARIANTS}
    consumers = {v: rig.consumer(v, works[v]) for v in VARIANTS}
    for variant, consumer in consumers.items():
        run_batch(consumer, min(scenario.batch, 10))  # warm-up: clients, pools, loggers
        works[variant].take()
    result = WallResult(scenario, {v: [] for v in VARIANTS}, {v: [] for v in VARIANTS})
    for _ in range(repetitions):
        for variant in VARIANTS:
            result.samples[variant].append(run_batch(consumers[variant], scenario.batch))
            result.slowest[variant].append(max(works[variant].take()))
    return result
