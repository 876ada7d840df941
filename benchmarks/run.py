"""`python -m benchmarks.run [--full]`: measure, write docs/benchmarks.md and .png, check targets.

Starts its own DynamoDB Local (and moto for SQS) and PostgreSQL server, and exits 1 when a
target is missed. When the machine was loaded (benchmarks/load.py) it leaves the committed report
alone, writes benchmarks.loaded.md and .png beside it, and exits 3 (1 if a target was missed too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from benchmarks import chart, harness, report
from benchmarks.load import Destination, Load, destination, settled
from benchmarks.settings import FULL, QUICK
from benchmarks.targets import Target, all_passed, evaluate
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.local_postgres import LocalPostgres

DOCS = Path(__file__).resolve().parent.parent / "docs"
LOADED_EXIT = 3
console = Console(stderr=True)


def _show(targets: list[Target]) -> None:
    table = Table(title="Benchmark targets")
    for column in ("Target", "Goal", "Measured", "Result"):
        table.add_column(column)
    for t in targets:
        verdict = "[green]pass" if t.passed else "[bold red]MISSED"
        table.add_row(t.name, t.goal, t.measured, verdict + (" (close)" if t.close else ""))
    console.print(table)


def publish(results: harness.Results, out: Path, load: Load) -> tuple[list[Target], Destination]:
    """Judge the targets and write the report and chart: over the committed ones only when the
    machine was quiet, else beside them (benchmarks/load.py)."""
    targets = evaluate(results)
    out.mkdir(parents=True, exist_ok=True)
    where = destination(out, load)
    chart.draw(results, where.chart)
    where.report.write_text(report.render(results, targets, where.chart.name, loaded=where.refused))
    return targets, where


def exit_code(targets: list[Target], where: Destination) -> int:
    """1 when a target was missed, else LOADED_EXIT when the committed report was left alone."""
    if not all_passed(targets):
        return 1
    return LOADED_EXIT if where.refused else 0


def main(
    full: Annotated[
        bool, typer.Option("--full/--quick", help="Full repetitions (make bench).")
    ] = False,
    out: Annotated[Path, typer.Option(help="Folder for benchmarks.md and benchmarks.png.")] = DOCS,
) -> None:
    settings = FULL if full else QUICK
    console.log(f"reading the load average (waiting up to {settings.load_settle_s:g} s for <= 1)")
    load_start = settled(settings.load_settle_s)
    # fsync off: DynamoDB Local keeps its tables in memory, so neither server waits on a disk.
    with DynamoDBLocal() as server, LocalPostgres(fsync=False) as postgres:
        results = harness.run(
            server.endpoint,
            settings,
            progress=lambda step: console.log(f"[bold]{step}"),
            postgres_dsn=postgres.dsn,
        )
    console.log("reading the load average again, the servers stopped")
    load = Load(load_start, settled(settings.load_settle_s))
    results.environment["Load average (1 min) at start / end"] = (
        f"{load.describe()} (read with the bench's servers stopped, once at most 1 or after "
        f"{settings.load_settle_s:g} s)"
    )
    targets, where = publish(results, out, load)
    _show(targets)
    console.log(where.notice(load))
    code = exit_code(targets, where)
    if code:
        raise typer.Exit(code=code)


if __name__ == "__main__":
    typer.run(main)
