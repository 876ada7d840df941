"""`status`: per consumer (and topic subscriber), queue and DLQ depth, pending records and
(local stack) what ran and the health of its worker processes."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from exactly_once import IdempotencyStore
from exactly_once.stores.protocol import Store
from exactly_once_cdk.outputs import IDEMPOTENCY_TABLE
from exactly_once_cli.common import CliError, StackOption, aws_target, stderr, stdout
from exactly_once_cli.store_target import DsnOption, database_errors, postgres_store
from exactly_once_ops.local_state import UpState, UpStats, WorkerHealth, default_paths, serving
from exactly_once_ops.local_target import explicit_setting
from exactly_once_ops.status import PENDING_CAP, StackStatus, stack_status
from exactly_once_ops.targets import DEFAULT_STACK, AwsTarget, stack_outputs

SINCE_START = ("processed", "duplicate", "permanent")
"""Poller outcomes shown for the local stack: ran, suppressed as duplicate, dead-lettered."""
SUBSCRIBER_SINCE_START = ("delivered", "processed", "duplicate", "permanent", "dead_lettered")
"""SNS delivery counts for the local stack: deliveries, ran, duplicates, dead-lettered by the
handler, and handed to the on-failure destination after Lambda's retries."""


def collect(
    target: AwsTarget, stack: str, dsn: str | None = None
) -> tuple[StackStatus, UpState | None, UpStats | None]:
    """The stack's status; its records from the PostgreSQL store at `dsn`, else from the local
    stack's PostgreSQL when `up` serves it on one, else from its table."""
    outputs = stack_outputs(target.cloudformation(), stack)
    local = serving(target.endpoint_url, stack)
    dsn = dsn or (local[0].postgres_dsn if local else None)
    with database_errors(dsn):
        store = postgres_store(dsn) if dsn else table_store(target, stack, outputs)
        status = stack_status(target.sqs(), target.client("lambda"), store, outputs)
    return (status, *local) if local else (status, None, None)


def table_store(target: AwsTarget, stack: str, outputs: dict[str, str]) -> Store:
    table = outputs.get(IDEMPOTENCY_TABLE)
    if not table:
        raise CliError(f"stack {stack!r} has no {IDEMPOTENCY_TABLE} output")
    ddb = target.client("dynamodb", target.endpoint("dynamodb", outputs))
    return IdempotencyStore(table, client=ddb)


def as_json(status: StackStatus, state: UpState | None, stats: UpStats | None) -> dict[str, Any]:
    consumers = []
    for c in status.consumers:
        entry: dict[str, Any] = asdict(c)
        if stats is not None:
            entry["since_start"] = {k: stats.count(c.consumer, k) for k in SINCE_START}
            entry["workers"] = _health_json(stats.health(c.consumer))
        consumers.append(entry)
    subscribers = []
    for s in status.subscribers:
        entry = asdict(s)
        if stats is not None:
            entry["since_start"] = {
                k: stats.subscriber_count(s.subscriber, k) for k in SUBSCRIBER_SINCE_START
            }
            entry["workers"] = _health_json(stats.health(s.subscriber))
        subscribers.append(entry)
    local = None
    if state is not None:
        local = {"pid": state.pid, "started_at": state.started_at}
        local["stats_updated_at"] = stats.updated_at if stats else None
    return {
        "consumers": consumers,
        "subscribers": subscribers,
        "pending_capped": status.pending_capped,
        "local": local,
    }


def _health_json(health: WorkerHealth | None) -> dict[str, Any] | None:
    return None if health is None else {**asdict(health), "state": health.describe()}


def _health_cell(health: WorkerHealth | None) -> str:
    return "-" if health is None else health.describe()


def render(stack: str, status: StackStatus, state: UpState | None, stats: UpStats | None) -> Group:
    """Queues and pending records per consumer; for the `up` stack, what ran since it started
    and its worker processes (running, replaced, or failing and why)."""
    now = Table(title=f"{stack}: queues and pending records")
    for name in ("consumer", "visible", "in flight", "DLQ", "IN_PROGRESS", "FAILED"):
        now.add_column(name, justify="left" if name == "consumer" else "right", no_wrap=True)
    for c in status.consumers:
        depths = (c.queue.visible, c.queue.in_flight, c.dead_letters.total)
        now.add_row(c.consumer, *map(str, (*depths, c.in_progress, c.failed)))
    for s in status.subscribers:  # SNS invokes them: no queue of their own
        pending = (s.dead_letters.total, s.in_progress, s.failed)
        now.add_row(f"{s.subscriber} (SNS)", "-", "-", *map(str, pending))
    parts: list[Table | Text] = [now]
    if status.pending_capped:
        parts.append(Text(f"more than {PENDING_CAP} pending records: the counts are a minimum"))
    if state is not None and stats is not None:
        since = Table(title=f"since `up` at {state.started_at} (pid {state.pid})")
        for name in ("consumer", "processed", "duplicates", "dead-lettered"):
            since.add_column(name, justify="left" if name == "consumer" else "right")
        since.add_column("workers", justify="left")
        for c in status.consumers:
            counts = [str(stats.count(c.consumer, k)) for k in SINCE_START]
            since.add_row(c.consumer, *counts, _health_cell(stats.health(c.consumer)))
        for s in status.subscribers:
            ran = [stats.subscriber_count(s.subscriber, k) for k in SINCE_START]
            ran[-1] += stats.subscriber_count(s.subscriber, "dead_lettered")  # after retries
            workers = _health_cell(stats.health(s.subscriber))
            since.add_row(f"{s.subscriber} (SNS)", *map(str, ran), workers)
        parts.append(since)
        for name, health in stats.workers.items():
            if health.failing:
                parts.append(Text(f"{name}: workers failing: {health.failing}", style="red"))
    return Group(*parts)


def status_cmd(
    ctx: typer.Context,
    stack: StackOption = DEFAULT_STACK,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON instead.")] = False,
    watch: Annotated[bool, typer.Option(help="Refresh until Ctrl-C.")] = False,
    interval: Annotated[float, typer.Option(min=0.2, help="Seconds between refreshes.")] = 2.0,
    dsn: DsnOption = None,
) -> None:
    """Per consumer: queue, in-flight and DLQ depth, IN_PROGRESS/FAILED records, what ran since up;
    per topic subscriber the same without a queue.

    What ran (processed, duplicates, dead-lettered since the stack came up) shows only for the
    stack `eonce up` serves, whose poller counts it. Works against any stack built from the
    constructs otherwise.
    """
    if json_output and watch:
        raise CliError("--json prints one document; for a refreshing view drop --json")
    target = aws_target(ctx)
    if target.endpoint_url is None and (paths := default_paths()) and paths.running():
        named = explicit_setting(None, target.profile, None) or "--region"
        stderr().print(
            f"[dim]note: a local stack is up, but {named} names another target; without it "
            '(or after `eval "$(eonce env)"`) the CLI uses the local stack[/]'
        )
    if json_output:
        typer.echo(json.dumps(as_json(*collect(target, stack, dsn)), indent=2))
        return
    if not watch:
        stdout().print(render(stack, *collect(target, stack, dsn)))
        return
    with Live(render(stack, *collect(target, stack, dsn)), console=stdout()) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(render(stack, *collect(target, stack, dsn)))
        except KeyboardInterrupt:
            return
