"""How much to measure: the full run behind docs/benchmarks.md, and the quick one CI runs."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.imports import ALL_CASES, BARE, LAYER
from exactly_once_ops.lambda_context import LocalLambdaContext


@dataclass(frozen=True)
class Settings:
    name: str
    latency_ms: float = 4.0  # added to every DynamoDB/SQS request: an in-region round trip
    io_ms: float = 20.0  # the I/O-bound business function's wait
    warmup_s: float = 20.0  # DynamoDB Local's JVM, before anything is measured
    batch_sizes: tuple[int, ...] = (10, 100)  # wall time is measured for each
    call_records: int = 10  # new and duplicate records when counting API calls
    in_progress_records: int = 10  # each needs a blocked holder consumer of its own
    wall_repetitions: int = 15  # batches of 10, per consumer
    wall_repetitions_large: int = 5  # batches of 100 (Powertools takes seconds each)
    cpu_batches: int = 30  # batches of 10 per CPU sample
    cpu_repetitions: int = 5
    cpu_without_latency: bool = True  # also measured, a target of its own when it is
    cpu_one_thread: bool = True  # the layer with concurrency=1 too, as a diagnostic
    import_runs: int = 15
    import_cases: tuple[str, ...] = ALL_CASES
    memory_batches: int = 20
    memory_runs: int = 3
    api_call_requests: int = 10  # first requests, then each replayed, when counting API calls
    api_requests: int = 100  # keys per API timing sample (each: a first request and a replay)
    api_repetitions: int = 7
    store_repetitions: int = 30  # single-record invocations per case, DynamoDB vs PostgreSQL
    throughput_records: int = 10_000  # new records per arm of the throughput row
    throughput_processes: int = 4  # worker processes at once: 2 per core on the 2-core bench box
    # Before reading the load average at start and at end, wait up to this long for the 1-minute
    # average to fall to 1 (benchmarks/load.py): the bench's own processes hold it near 1.
    load_settle_s: float = 60.0


FULL = Settings(name="full")
# `python -m benchmarks.run` without --full: a first look at the targets in well under a minute.
QUICK = Settings(
    name="quick",
    warmup_s=8.0,
    in_progress_records=3,
    batch_sizes=(10,),  # the targets only concern batches of 10
    wall_repetitions=9,
    cpu_batches=12,
    cpu_repetitions=5,
    cpu_one_thread=False,
    import_runs=7,
    import_cases=(BARE, LAYER),
    memory_batches=5,
    memory_runs=1,
    api_requests=30,
    api_repetitions=5,
    store_repetitions=10,
    throughput_records=1_000,
    load_settle_s=0.0,
)
# tests/bench: every measurement once, so CI proves the pipeline behind the report still runs
# end to end. Its times are not checked (too few samples, on a shared machine); its call counts are.
SMOKE = Settings(
    name="smoke",
    io_ms=1.0,
    warmup_s=0.0,
    in_progress_records=3,
    batch_sizes=(10,),
    wall_repetitions=1,
    cpu_batches=1,
    cpu_repetitions=1,
    import_runs=1,
    import_cases=(BARE, LAYER),
    memory_batches=1,
    memory_runs=1,
    api_requests=1,
    api_repetitions=1,
    store_repetitions=1,
    throughput_records=40,
    throughput_processes=2,
    load_settle_s=0.0,
)


def invocation_context() -> LocalLambdaContext:
    """A fresh context per invocation: both libraries size their locks from its remaining time."""
    return LocalLambdaContext("bench-consumer", timeout_s=60)
