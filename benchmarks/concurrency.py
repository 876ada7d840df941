"""How many records of one batch each consumer runs at once, counted rather than timed.

The layer's speed-up on I/O-bound batches comes from running a batch's records side by side;
Powertools' `BatchProcessor` runs them one after another. Wall-clock ratios show that only
statistically, and a loaded machine skews them. Here the business function counts the calls
in flight, and can hold each call at a barrier until `rendezvous` of them have arrived: a
consumer that runs 10 records at once passes a barrier of 10 however slow the machine is, and
one that does not breaks it at the timeout. The count is then exact, not a sample.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from benchmarks.business import Work, make_work
from benchmarks.rig import Rig, Variant
from benchmarks.settings import invocation_context
from benchmarks.sqs_events import new_batch

RENDEZVOUS_TIMEOUT_S = 30.0  # only reached when the consumer never runs `rendezvous` at once


class InFlightWork:
    """The business function, counting its calls in flight at once (thread-safe).

    With `rendezvous` > 1 each call waits, while counted as in flight, until that many calls
    are in flight together; `rendezvous=1` never waits.
    """

    def __init__(
        self, work: Work, rendezvous: int = 1, timeout_s: float = RENDEZVOUS_TIMEOUT_S
    ) -> None:
        self._work = work
        self._barrier = threading.Barrier(rendezvous)
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0
        self.calls = 0

    def __call__(self, order: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            # Raises BrokenBarrierError on timeout, so the record fails and the run shows it.
            self._barrier.wait(self._timeout_s)
            return self._work(order)
        finally:
            with self._lock:
                self._in_flight -= 1


@dataclass(frozen=True)
class Overlap:
    max_in_flight: int  # business function calls running at the same moment, at most
    calls: int  # business function calls in all
    failed: int  # records reported in batchItemFailures


def batch_overlap(rig: Rig, variant: Variant, records: int = 10, rendezvous: int = 1) -> Overlap:
    """Run one batch of `records` new, distinct keys through a fresh consumer of `variant`."""
    work = InFlightWork(make_work(0), rendezvous)
    consumer = rig.consumer(variant, work)
    response = consumer(new_batch(records), invocation_context())
    return Overlap(work.max_in_flight, work.calls, len(response.get("batchItemFailures", [])))
