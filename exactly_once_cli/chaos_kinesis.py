"""`chaos --source kinesis`: the fault injection on a Kinesis stream (fault_injection.stream_*).

Kept apart from `chaos.py` so the queue run's command stays as it was; the shared options mean
the same thing here, with the stream's reading where a queue's does not apply (a dropped SQS
delete is a dropped checkpoint; `--lost-reply` loses DynamoDB replies).
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from exactly_once_cli.common import stdout
from fault_injection.settings import FaultRates
from fault_injection.stream_harness import DEFAULT_STREAM_CONSUMERS, stream_consumers
from fault_injection.stream_page import write_page
from fault_injection.stream_report import print_report
from fault_injection.stream_runner import run_kinesis_chaos
from fault_injection.stream_workload import KinesisSettings

DEFAULT_RECORDS = 3_000
DEFAULT_POLLERS = 3
QUEUE_PAGES = ("chaos.md", "chaos-postgres.md")


def run_kinesis(
    *,
    records: int | None,
    consumers: str | None,
    rates: FaultRates,
    shards: int,
    workers: int | None,
    seed: int,
    work_ms: int,
    pause: float | None,
    timeout: float,
    markdown: Path | None,
    lock_off: bool,
) -> None:
    """Run the stream chaos; exit 1 when the fenced consumer (`layer`) breaks an invariant."""
    if markdown is not None and markdown.name in QUEUE_PAGES:
        raise typer.BadParameter(
            f"docs/{markdown.name} is a queue run's page; write this one to docs/chaos-kinesis.md",
            param_hint="--markdown",
        )
    try:
        kinds = stream_consumers(consumers or DEFAULT_STREAM_CONSUMERS)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--consumers") from exc
    settings = KinesisSettings(
        records=records or DEFAULT_RECORDS,
        rates=rates,
        seed=seed,
        workers=workers or DEFAULT_POLLERS,
        shards=shards,
        work_ms=work_ms,
        pause_s=pause,
        drain_timeout_s=timeout,
        lock_off=lock_off,
    )
    console = stdout()
    result = run_kinesis_chaos(settings, kinds, console)
    print_report(console, settings, result.plan, result.runs)
    if markdown is not None:
        write_page(markdown, result, "eonce " + " ".join(sys.argv[1:]))
        console.print(f"wrote {markdown}")
    layer = result.run("layer")
    if layer is not None and not layer.passed:
        raise typer.Exit(1)
