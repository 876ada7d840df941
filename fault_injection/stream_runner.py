"""Start moto and DynamoDB Local once and run each stream consumer under test through one plan."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from fault_injection.stream_harness import (
    KinesisStack,
    StreamConsumerKind,
    StreamRun,
    kinesis_stack,
    run_stream_consumer,
)
from fault_injection.stream_workload import KinesisSettings, StreamPlan, plan_stream


@dataclass
class KinesisResult:
    settings: KinesisSettings
    plan: StreamPlan
    runs: list[StreamRun] = field(default_factory=list)

    def run(self, name: str) -> StreamRun | None:
        return next((r for r in self.runs if r.kind.name == name), None)


def run_kinesis_chaos(
    settings: KinesisSettings,
    kinds: list[StreamConsumerKind],
    console: Console,
    stack: KinesisStack | None = None,
    workdir: Path | None = None,
) -> KinesisResult:
    """Run every consumer in turn; on servers of its own unless a stack is given."""
    result = KinesisResult(settings, plan_stream(settings))
    if stack is None:
        started = time.monotonic()
        with console.status("Starting moto (Kinesis, SQS) and DynamoDB Local..."):
            context = kinesis_stack()
            running = context.__enter__()
        console.print(f"[green]✓[/] servers up in {time.monotonic() - started:.0f}s")
        try:
            return _run_all(result, kinds, console, running, workdir)
        finally:
            context.__exit__(None, None, None)
    return _run_all(result, kinds, console, stack, workdir)


def _run_all(
    result: KinesisResult,
    kinds: list[StreamConsumerKind],
    console: Console,
    stack: KinesisStack,
    workdir: Path | None,
) -> KinesisResult:
    base = workdir or Path(tempfile.mkdtemp(prefix="chaos-kinesis-"))
    for kind in kinds:
        with console.status(f"{kind.name}: starting pollers") as status:
            run = run_stream_consumer(
                stack,
                kind,
                result.plan,
                result.settings,
                base,
                lambda text, s=status: s.update(text),  # type: ignore[misc]
            )
        verdict = "[green]PASS[/]" if run.passed else "[red]FAIL[/]"
        console.print(f"{verdict} {kind.title}: {run.elapsed_s:.0f}s (logs in {base})")
        result.runs.append(run)
    return result
