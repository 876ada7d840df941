"""`locks`: find stuck and failed work through the sparse index, inspect a key, reset a failure."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import Annotated

import typer
from rich.table import Table

from exactly_once import IdempotencyStore, Status, StoredRecord
from exactly_once_cdk.outputs import IDEMPOTENCY_TABLE
from exactly_once_cli.common import CliError, StackOption, aws_target, stdout
from exactly_once_ops.targets import DEFAULT_STACK, stack_outputs

locks_app = typer.Typer(
    help="Stuck IN_PROGRESS and FAILED idempotency records.", no_args_is_help=True
)

TableOption = Annotated[
    str | None, typer.Option(help="Idempotency table (default: the stack's output).")
]


def open_store(ctx: typer.Context, table: str | None, stack: str) -> IdempotencyStore:
    target = aws_target(ctx)
    if not table:
        table = stack_outputs(target.cloudformation(), stack).get(IDEMPOTENCY_TABLE)
        if not table:
            raise CliError(f"stack {stack!r} has no {IDEMPOTENCY_TABLE} output; pass --table")
    return IdempotencyStore(table, client=target.client("dynamodb"))


def _age(ms: int | None) -> str:
    if ms is None:
        return "-"
    delta = ms / 1000 - time.time()
    return f"in {delta:.0f}s" if delta >= 0 else f"{-delta:.0f}s ago"


@locks_app.command("list")
def list_cmd(
    ctx: typer.Context,
    status: Annotated[str, typer.Option(help="in-progress, failed or all")] = "all",
    stuck_only: Annotated[
        bool, typer.Option(help="Only IN_PROGRESS records whose lease expired.")
    ] = False,
    limit: Annotated[int, typer.Option(min=1)] = 100,
    table: TableOption = None,
    stack: StackOption = DEFAULT_STACK,
) -> None:
    """List pending work without a Scan."""
    wanted = {"in-progress": [Status.IN_PROGRESS], "failed": [Status.FAILED]}.get(
        status, [Status.IN_PROGRESS, Status.FAILED] if status == "all" else None
    )
    if wanted is None:
        raise CliError(f"--status must be in-progress, failed or all, not {status!r}")
    store = open_store(ctx, table, stack)
    grid = Table(title="pending idempotency records")
    for column in ("id", "status", "fence", "attempts", "owner", "lease", "error"):
        grid.add_column(column)
    shown = 0
    for wanted_status in wanted:
        for r in store.list_pending(wanted_status, stuck_only=stuck_only, limit=limit - shown):
            error = f"{r.error.type}: {r.error.message}" if r.error else ""
            if r.error and not r.error.retryable:
                error += " (permanent)"
            grid.add_row(
                r.record_id,
                r.status.value,
                str(r.fence),
                str(r.attempts),
                r.owner or "-",
                _age(r.lease_expires_at_ms) if r.status is Status.IN_PROGRESS else "-",
                error,
            )
            shown += 1
        if shown >= limit:
            break
    stdout().print(grid)
    stdout().print(f"{shown} record(s)")


def _record_json(record: StoredRecord) -> str:
    data = asdict(record)
    data["status"] = record.status.value
    result, undecodable = record.decoded_result()  # never raises, whatever was stored
    data["result"] = result
    if undecodable:
        data["result_undecodable"] = undecodable
    return json.dumps(data, default=repr, indent=2)


@locks_app.command("show")
def show_cmd(
    ctx: typer.Context,
    scope: Annotated[str, typer.Argument(help="The consumer's scope, e.g. orders")],
    key: Annotated[str, typer.Argument(help="The business key, e.g. o-1001")],
    table: TableOption = None,
    stack: StackOption = DEFAULT_STACK,
) -> None:
    """Print one key's record (TTL-expired records count as absent)."""
    record = open_store(ctx, table, stack).get(scope, key)
    if record is None:
        raise CliError(f"no live record for {scope}#{key}")
    stdout().print_json(_record_json(record))


@locks_app.command("reset")
def reset_cmd(
    ctx: typer.Context,
    scope: Annotated[str, typer.Argument()],
    key: Annotated[str, typer.Argument()],
    table: TableOption = None,
    stack: StackOption = DEFAULT_STACK,
) -> None:
    """Make a FAILED record retryable, so the next delivery or a replay runs it."""
    if not open_store(ctx, table, stack).reset(scope, key):
        raise CliError(f"{scope}#{key} is not FAILED; nothing to reset")
    stdout().print(f"reset {scope}#{key}: the next delivery will run it")
