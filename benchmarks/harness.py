"""Run every measurement against one DynamoDB Local and collect the results.

SQS is only needed for the layer's in-progress path (it hides the message until the holder's
lease ends), so a moto server process provides it; DynamoDB is always DynamoDB Local. Given a
PostgreSQL database, the layer also runs on it, side by side with DynamoDB (benchmarks/stores.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TextIO

from benchmarks import api, calls, cpu, imports, memory, stores, throughput, walltime
from benchmarks.api import ApiResults
from benchmarks.calls import CallCounts
from benchmarks.cpu import CpuResult
from benchmarks.environment import describe, describe_postgres
from benchmarks.imports import ImportResult
from benchmarks.memory import MemoryResult
from benchmarks.rig import VARIANTS, Rig
from benchmarks.settings import Settings
from benchmarks.stores import StoreResults
from benchmarks.throughput import ThroughputResult
from benchmarks.walltime import WallResult
from benchmarks.warmup import batch_round_trip_s, local_round_trip_s, warm_up
from local_aws.moto_server import MotoServer

Progress = Callable[[str], None]


@dataclass
class Results:
    settings: Settings
    environment: dict[str, str]
    calls: list[CallCounts]
    wall: list[WallResult]
    cpu: CpuResult
    cpu_no_latency: CpuResult | None
    imports: ImportResult
    memory: MemoryResult
    api: ApiResults
    stores: StoreResults | None = None  # DynamoDB vs PostgreSQL, when a server was given
    # A warm DynamoDB Local GetItem alone, no injected latency (median), for the report.
    dynamodb_round_trip_s: float = 0.0
    throughput: ThroughputResult | None = None
    # The bare requests of a batch of 10 (warmup.batch_round_trip_s): with the injected latency,
    # one round trip of the I/O-bound batch's limit.
    batch_round_trip_s: float = 0.0

    @property
    def round_trip_s(self) -> float:
        """One round trip of a batch's request as the rig models it: the injected latency +
        the server's time for a bare batch of ten statements."""
        return self.settings.latency_ms / 1000 + self.batch_round_trip_s

    def wall_result(self, batch: int, io_bound: bool) -> WallResult:
        for result in self.wall:
            if result.scenario.batch == batch and bool(result.scenario.io_ms) == io_bound:
                return result
        raise KeyError((batch, io_bound))


@functools.cache
def _devnull() -> TextIO:
    """Kept open for the process: loggers created while quiet keep writing to it."""
    return open(os.devnull, "w")


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """The layer logs a line and an EMF metrics document per batch; keep them off the console.

    They are still produced (their cost is measured), only written to /dev/null.
    """
    with contextlib.redirect_stdout(_devnull()):
        yield


@dataclass
class _InProcess:
    round_trip_s: float
    round_trip_10_s: float
    batch_round_trip_s: float
    calls: list[CallCounts]
    wall: list[WallResult]
    cpu: CpuResult
    cpu_no_latency: CpuResult | None
    api: ApiResults
    stores: StoreResults | None
    throughput: ThroughputResult


def _in_process(
    rig: Rig, settings: Settings, progress: Progress, postgres_dsn: str | None
) -> _InProcess:
    progress(f"warming DynamoDB Local up for {settings.warmup_s:g} s")
    warm_up(rig, settings.warmup_s)
    round_trip = local_round_trip_s(rig)
    round_trip_10 = local_round_trip_s(rig, concurrency=10)
    batch_trip = batch_round_trip_s(rig)
    # First, so that by the end of the run the load average has forgotten the saturated cores.
    progress(
        f"throughput: {settings.throughput_records} records per arm, "
        f"{settings.throughput_processes} processes"
    )
    rates = throughput.measure(
        rig, postgres_dsn, settings.throughput_records, settings.throughput_processes
    )
    progress("API calls per record")
    counts = [
        c
        for v in VARIANTS
        for c in calls.calls_per_record(rig, v, settings.call_records, settings.in_progress_records)
    ]
    wall = []
    for batch in settings.batch_sizes:
        repetitions = settings.wall_repetitions if batch <= 10 else settings.wall_repetitions_large
        for io_ms in (settings.io_ms, 0.0):
            scenario = walltime.Scenario(batch, io_ms)
            progress(f"wall time: {scenario.label} x{repetitions}")
            wall.append(walltime.measure(rig, scenario, repetitions))
    progress("CPU per record")
    cpu_result = cpu.measure(
        rig, settings.cpu_batches, settings.cpu_repetitions, one_thread=settings.cpu_one_thread
    )
    no_latency = None
    if settings.cpu_without_latency:
        progress("CPU per record, without the injected latency")
        no_latency = cpu.measure(
            rig,
            settings.cpu_batches,
            settings.cpu_repetitions,
            latency=False,
            one_thread=settings.cpu_one_thread,
        )
    progress("API: DynamoDB calls per request")
    api_calls = api.all_calls(rig, settings.api_call_requests)
    progress(f"API: overhead per request, {settings.api_repetitions}x{settings.api_requests} keys")
    api_timings = api.measure(rig, settings.api_requests, settings.api_repetitions)
    store_results = None
    if postgres_dsn is not None:
        progress("the store: DynamoDB vs PostgreSQL, round trips and latency per record")
        store_results = stores.measure(rig, postgres_dsn, settings)
    return _InProcess(
        round_trip,
        round_trip_10,
        batch_trip,
        counts,
        wall,
        cpu_result,
        no_latency,
        ApiResults(api_calls, api_timings),
        store_results,
        rates,
    )


@contextlib.contextmanager
def bench_rig(dynamodb_endpoint: str, settings: Settings) -> Iterator[Rig]:
    """A rig with a moto server for SQS and both consumers' tables, dropped on the way out."""
    with MotoServer() as moto:
        rig = Rig(dynamodb_endpoint, moto.endpoint, settings.latency_ms / 1000)
        rig.create_tables()
        try:
            yield rig
        finally:
            rig.drop_tables()


def run(
    dynamodb_endpoint: str,
    settings: Settings,
    progress: Progress = lambda _: None,
    postgres_dsn: str | None = None,
) -> Results:
    """Everything, against DynamoDB Local; with `postgres_dsn` (a migrated database) the layer
    on PostgreSQL too, side by side with DynamoDB."""
    with bench_rig(dynamodb_endpoint, settings) as rig:
        with quiet_stdout():
            measured = _in_process(rig, settings, progress, postgres_dsn)
        progress("peak memory")
        memory_result = memory.measure(
            dynamodb_endpoint,
            {"layer": rig.layer_table, "powertools": rig.powertools_table},
            settings.memory_batches,
            settings.memory_runs,
        )
    progress("cold-start imports")
    import_result = imports.measure(settings.import_runs, settings.import_cases)
    environment = describe(settings)
    environment["DynamoDB Local round trip (warm, no injected latency)"] = (
        f"{measured.round_trip_s * 1000:.1f} ms alone, "
        f"{measured.round_trip_10_s * 1000:.1f} ms each with 10 in flight from one process "
        "(medians)"
    )
    if measured.stores is not None:
        environment.update(describe_postgres(measured.stores, settings))
    return Results(
        settings,
        environment,
        measured.calls,
        measured.wall,
        measured.cpu,
        measured.cpu_no_latency,
        import_result,
        memory_result,
        measured.api,
        measured.stores,
        measured.round_trip_s,
        measured.throughput,
        measured.batch_round_trip_s,
    )
