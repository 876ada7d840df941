"""Process CPU time per record, with a trivial business function, interleaved batch by batch.

`time.process_time` counts every thread of this process (the layer's worker threads included)
but not DynamoDB Local, a separate Java process, nor the injected latency, which sleeps.

The target is measured on the rig as it is (with the injected latency). The same measurement
without the latency is reported next to it, because the two differ: while a request waits,
other processes get the core and cool its caches, and with no wait at all the layer's ten
threads contend for the GIL without pause. Neither alone is the whole picture.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

from benchmarks.business import make_work
from benchmarks.consumers import Consumer
from benchmarks.rig import VARIANTS, Rig, Variant
from benchmarks.settings import invocation_context
from benchmarks.sqs_events import new_batch

BATCH = 10
ONE_THREAD = "layer, 1 thread"  # diagnostic: the layer's per-record work without its pool


@dataclass
class CpuResult:
    records_per_sample: int
    latency: bool
    samples: dict[str, list[float]] = field(default_factory=dict)  # CPU seconds per record

    def median(self, arm: str) -> float:
        return statistics.median(self.samples[arm])

    @property
    def ratio(self) -> float:
        """Layer CPU per record over Powertools' (below 1 means the layer uses less)."""
        return self.median(Variant.LAYER) / self.median(Variant.POWERTOOLS)

    def ratio_of(self, arm: str) -> float:
        return self.median(arm) / self.median(Variant.POWERTOOLS)


def measure(
    rig: Rig, batches: int, repetitions: int, *, latency: bool = True, one_thread: bool = False
) -> CpuResult:
    """Each sample is `batches` batches per consumer, alternating batch by batch.

    Alternating at the finest grain means the consumers see the same machine: a burst of other
    work lands on all of them, not on whichever happened to be running. `one_thread` adds the
    layer with concurrency=1, which separates its per-record work from its thread pool's cost.
    """
    work = make_work(0)
    consumers: dict[str, Consumer] = {v: rig.consumer(v, work, latency=latency) for v in VARIANTS}
    if one_thread:
        consumers[ONE_THREAD] = rig.consumer(
            Variant.LAYER, work, latency=latency, layer_concurrency=1
        )
    for consumer in consumers.values():
        consumer(new_batch(BATCH), invocation_context())  # warm-up
    result = CpuResult(batches * BATCH, latency, {arm: [] for arm in consumers})
    for _ in range(repetitions):
        spent = dict.fromkeys(consumers, 0.0)
        for _ in range(batches):
            for arm, consumer in consumers.items():
                event = new_batch(BATCH)  # built outside the clock
                started = time.process_time()
                consumer(event, invocation_context())
                spent[arm] += time.process_time() - started
        for arm in consumers:
            result.samples[arm].append(spent[arm] / (batches * BATCH))
    return result
