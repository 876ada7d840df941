"""The HTTP API row: the same API Gateway requests through `@idempotent_api` and Powertools'
`@idempotent`, first requests and replays (the same request again, with the same key).

Two measurements, each checked rather than assumed (the handler runs once per key, a replay
answers the first response again without running it):

- DynamoDB calls per request, counted by the botocore hook the SQS rows use;
- overhead per request: CPU time (`time.process_time`) and wall time of each handler, minus
  the same handler undecorated, all three interleaved request by request in one loop.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from benchmarks.api_events import api_event
from benchmarks.api_handlers import Api, bare_api
from benchmarks.calls import CountingWork
from benchmarks.errors import BenchmarkInvalid
from benchmarks.instrument import CallCounter
from benchmarks.rig import VARIANTS, Rig, Variant
from benchmarks.settings import invocation_context

BARE = "bare"  # the handler without idempotency: the baseline of the overhead
ARMS = (Variant.LAYER.value, Variant.POWERTOOLS.value, BARE)
WARMUP_REQUESTS = 5  # per arm, first requests and replays, before anything is measured
CREATED = 201


class ApiCase(StrEnum):
    FIRST = "first request"
    REPLAY = "replay"


class Clock(StrEnum):
    CPU = "cpu"
    WALL = "wall"


CLOCKS: dict[Clock, Callable[[], float]] = {
    Clock.CPU: time.process_time,
    Clock.WALL: time.perf_counter,
}


@dataclass(frozen=True)
class ApiCallCounts:
    variant: Variant
    case: ApiCase
    requests: int
    calls: dict[str, int]  # "dynamodb.UpdateItem" -> count, over all `requests`

    def per_request(self, service: str = "dynamodb") -> float:
        prefix = f"{service}."
        return sum(n for op, n in self.calls.items() if op.startswith(prefix)) / self.requests

    def breakdown(self) -> str:
        """E.g. "PutItem 1 + UpdateItem 1" per request."""
        parts = [
            f"{op.split('.', 1)[1]} {n / self.requests:g}" for op, n in sorted(self.calls.items())
        ]
        return " + ".join(parts) or "none"


def _check(variant: str, case: ApiCase, response: dict[str, Any], first_body: str | None) -> str:
    """The response's body; a wrong status or a replay that is not the first answer raises."""
    if response.get("statusCode") != CREATED:
        raise BenchmarkInvalid(f"{variant}: {case} answered {response}")
    body = str(response.get("body"))
    if first_body is not None and body != first_body:
        raise BenchmarkInvalid(f"{variant}: replay answered {body!r}, first {first_body!r}")
    return body


def calls_per_request(rig: Rig, variant: Variant, requests: int) -> list[ApiCallCounts]:
    """`requests` first requests, then each again (a client's retry): calls counted apart."""
    counter = CallCounter()
    work = CountingWork()
    api = rig.api(variant, work, counter)
    events = [api_event() for _ in range(requests)]
    bodies = [_check(variant, ApiCase.FIRST, api(e, invocation_context()), None) for e in events]
    if work.runs != requests:
        raise BenchmarkInvalid(f"{variant}: {requests} first requests ran {work.runs} times")
    first = ApiCallCounts(variant, ApiCase.FIRST, requests, counter.snapshot())

    counter.reset()
    for event, body in zip(events, bodies, strict=True):
        _check(variant, ApiCase.REPLAY, api(event, invocation_context()), body)
    if work.runs != requests:
        raise BenchmarkInvalid(f"{variant}: a replay ran the handler ({work.runs} runs)")
    return [first, ApiCallCounts(variant, ApiCase.REPLAY, requests, counter.snapshot())]


def all_calls(rig: Rig, requests: int) -> list[ApiCallCounts]:
    return [c for v in VARIANTS for c in calls_per_request(rig, v, requests)]


@dataclass
class ApiTimings:
    requests_per_sample: int
    latency: bool
    # (clock, case, arm) -> seconds per request, one value per sample
    samples: dict[tuple[Clock, ApiCase, str], list[float]] = field(default_factory=dict)

    def median(self, clock: Clock, case: ApiCase, arm: str) -> float:
        return statistics.median(self.samples[(clock, case, arm)])

    def overheads(self, clock: Clock, case: ApiCase, arm: str) -> list[float]:
        """Each sample's time per request over the undecorated handler's, same sample."""
        bare = self.samples[(clock, case, BARE)]
        return [d - b for d, b in zip(self.samples[(clock, case, arm)], bare, strict=True)]

    def overhead(self, clock: Clock, case: ApiCase, arm: str) -> float:
        return statistics.median(self.overheads(clock, case, arm))

    def ratio(self, clock: Clock, case: ApiCase) -> float:
        """The layer's overhead over Powertools' (below 1 means the layer adds less)."""
        return self.overhead(clock, case, Variant.LAYER) / self.overhead(
            clock, case, Variant.POWERTOOLS
        )


def _timed(api: Api, event: dict[str, Any]) -> tuple[dict[str, Any], dict[Clock, float]]:
    context = invocation_context()  # built outside the clocks
    started = {clock: read() for clock, read in CLOCKS.items()}
    response = api(event, context)
    ended = {clock: read() for clock, read in CLOCKS.items()}
    return response, {clock: ended[clock] - started[clock] for clock in CLOCKS}


def measure(rig: Rig, requests: int, repetitions: int, *, latency: bool = True) -> ApiTimings:
    """Each sample is `requests` keys per arm. Per key, every arm answers its first request,
    then every arm its replay; the arm that goes first rotates from key to key, so no arm
    always runs right after another's (its caches warm, or cooled by its sleep)."""
    works = {arm: CountingWork() for arm in ARMS}
    apis: dict[str, Api] = {
        Variant.LAYER.value: rig.api(Variant.LAYER, works[Variant.LAYER], latency=latency),
        Variant.POWERTOOLS.value: rig.api(
            Variant.POWERTOOLS, works[Variant.POWERTOOLS], latency=latency
        ),
        BARE: bare_api(works[BARE]),  # runs on replays too: it has no idempotency
    }
    for api in apis.values():  # warm-up: clients, connection pools, loggers, JMESPath
        for _ in range(WARMUP_REQUESTS):
            event = api_event()
            api(event, invocation_context())
            api(event, invocation_context())

    result = ApiTimings(requests, latency)
    for clock in Clock:
        for case in ApiCase:
            for arm in ARMS:
                result.samples[(clock, case, arm)] = []
    turn = 0
    for _ in range(repetitions):
        spent = dict.fromkeys(result.samples, 0.0)
        for _ in range(requests):
            order = ARMS[turn % len(ARMS) :] + ARMS[: turn % len(ARMS)]
            turn += 1
            events = {arm: api_event() for arm in ARMS}
            first_bodies: dict[str, str] = {}
            for case in ApiCase:
                for arm in order:
                    response, took = _timed(apis[arm], events[arm])
                    first = first_bodies.get(arm) if arm != BARE else None
                    first_bodies[arm] = _check(arm, case, response, first)
                    for clock, seconds in took.items():
                        spent[(clock, case, arm)] += seconds
        for key, total in spent.items():
            result.samples[key].append(total / requests)

    ran = WARMUP_REQUESTS + requests * repetitions
    for variant in VARIANTS:
        if works[variant].runs != ran:
            raise BenchmarkInvalid(f"{variant}: {ran} keys ran the handler {works[variant].runs}x")
    return result


@dataclass
class ApiResults:
    calls: list[ApiCallCounts]
    timings: ApiTimings

    def counts(self, variant: Variant, case: ApiCase) -> ApiCallCounts:
        for counts in self.calls:
            if counts.variant is variant and counts.case is case:
                return counts
        raise KeyError((variant, case))
