"""`python -m benchmarks.run [--full]`: measure, write docs/benchmarks.md and .png, check targets.

Starts its own DynamoDB Local (and moto for SQS) and PostgreSQL server, and exits 1 when a
target is missed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from benchmarks import chart, harness, report
from benchmarks.settings import FULL, QUICK
from benchmarks.targets import Target, all_passed, evaluate
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.local_postgres import LocalPostgres

DOCS = Path(__file__).resolve().parent.parent / "docs"
console = Console(stderr=True)


def _show(targets: list[Target]) -> None:
    table = Table(title="Benchmark targets")
    for column in ("Target", "Goal", "Measured", "Result"):
        table.add_column(column)
    for t in targets:
        verdict = "[green]pass" if t.passed else "[bold red]MISSED"
        table.add_row(t.name, t.goal, t.measured, verdict + (" (close)" if t.close else ""))
    console.print(table)


def main(
    full: Annotated[
        bool, typer.Option("--full/--quick", help="Full repetitions (make bench).")
    ] = False,
    out: Annotated[Path, typer.Option(help="Folder for benchmarks.md and benchmarks.png.")] = DOCS,
) -> None:
    settings = FULL if full else QUICK
    # fsync off: DynamoDB Local keeps its tables in memory, so neither server waits on a disk.
    with DynamoDBLocal() as server, LocalPostgres(fsync=False) as postgres:
        results = harness.run(
            server.endpoint,
            settings,
            progress=lambda step: console.log(f"[bold]{step}"),
            postgres_dsn=postgres.dsn,
        )
    targets = evaluate(results)
    out.mkdir(parents=True, exist_ok=True)
    chart.draw(results, out / "benchmarks.png")
    (out / "benchmarks.md").write_text(report.render(results, targets, "benchmarks.png"))
    console.log(f"wrote {out / 'benchmarks.md'} and {out / 'benchmarks.png'}")
    _show(targets)
    if not all_passed(targets):
        raise typer.Exit(code=1)


if __name__ == "__main__":
    typer.run(main)
