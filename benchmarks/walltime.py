"""Wall time per batch, both consumers interleaved (a, b, a, b, ...) in one process.

Every measured batch holds new business ids, so each record does its full work: lock, run,
complete. Each consumer is warmed up first, as a warm Lambda container would be.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

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


@dataclass
class WallResult:
    scenario: Scenario
    samples: dict[Variant, list[float]] = field(default_factory=dict)  # seconds per batch

    def median(self, variant: Variant) -> float:
        return statistics.median(self.samples[variant])

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
    consumers = {v: rig.consumer(v, make_work(scenario.io_ms / 1000)) for v in VARIANTS}
    for consumer in consumers.values():
        run_batch(consumer, min(scenario.batch, 10))  # warm-up: clients, pools, loggers
    result = WallResult(scenario, {v: [] for v in VARIANTS})
    for _ in range(repetitions):
        for variant in VARIANTS:
            result.samples[variant].append(run_batch(consumers[variant], scenario.batch))
    return result
