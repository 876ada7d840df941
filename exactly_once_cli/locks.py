"""`locks`: find stuck and failed work through the sparse index, inspect a key, reset a failure.

Every command says which table at which endpoint it read, so an empty answer from the wrong
DynamoDB (e.g. the emulator's empty copy of the local stack's tables) is visible as such. With
`--dsn` (or on a local stack that runs on PostgreSQL) they read the PostgreSQL store instead.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from exactly_once import IdempotencyStore, Status, StoredRecord
from exactly_once.keys import HASHED_PREFIX, storable_key
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import StepPoint
from exactly_once_cdk.outputs import IDEMPOTENCY_TABLE
from exactly_once_cli.common import CliError, StackOption, aws_target, stdout
from exactly_once_cli.store_target import (
    DsnOption,
    database_errors,
    describe,
    postgres_store,
    recorded_dsn,
)
from exactly_once_ops.targets import DEFAULT_STACK, stack_table

locks_app = typer.Typer(
    help="Stuck IN_PROGRESS and FAILED idempotency records.", no_args_is_help=True
)

TableOption = Annotated[
    str | None,
    typer.Option(
        help="Idempotency table (default: the stack's output; its DynamoDB endpoint is then "
        "the stack's LocalDynamoDbEndpoint output, if any, unless AWS_ENDPOINT_URL_DYNAMODB "
        "is set)."
    ),
]

KeyArgument = Annotated[
    str,
    typer.Argument(
        help="The business key, e.g. o-1001 (stored as the consumers store it: hashed when over "
        "1 KiB, not UTF-8 or starting with sha256:). With --stored: the key as stored."
    ),
]
StoredOption = Annotated[
    bool,
    typer.Option(
        "--stored",
        help="KEY is the key as stored, as `locks list` prints it after SCOPE# (a sha256: "
        "key, an HTTP caller|key), not a business key.",
    ),
]

OTHER_COLUMNS_WIDTH = 100
"""What `locks list` leaves beside the id column: status, fence, attempts and lease whole, some
room for the owner and the error, which fold."""

TIME_FIELDS = {
    "created_at_ms": 1000,
    "updated_at_ms": 1000,
    "lease_expires_at_ms": 1000,
    "expires_at_s": 1,
}
"""A record's epoch times, by field, in units per second."""


def store_dsn(ctx: typer.Context, dsn: str | None, table: str | None, stack: str) -> str | None:
    """The PostgreSQL store to read: --dsn, else (no --table) the local stack's, if it has one."""
    if dsn or table:
        return dsn
    return recorded_dsn(aws_target(ctx).endpoint_url, stack)


def open_store(
    ctx: typer.Context, table: str | None, stack: str, dsn: str | None = None
) -> tuple[Store, str]:
    """The store, and "TABLE at ENDPOINT (from SETTING)" (or the database) to say where it was
    read."""
    if dsn:
        return postgres_store(dsn), describe(dsn)
    target = aws_target(ctx)
    name, endpoint = stack_table(target, stack, IDEMPOTENCY_TABLE, table)
    return IdempotencyStore(
        name, client=target.client("dynamodb", endpoint)
    ), f"{name} at {endpoint}"


def duration(seconds: float) -> str:
    """A short human duration: 42s, 3m 5s, 2h 10m, 14d 23h."""
    total = round(abs(seconds))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def age(epoch_s: float, now_s: float) -> str:
    """How far from now: "in 25s" or "3m 5s ago"."""
    delta = epoch_s - now_s
    return f"in {duration(delta)}" if delta >= 0 else f"{duration(delta)} ago"


def when(epoch_s: float, now_s: float) -> str:
    """UTC ISO time with its age: 2026-01-01T00:00:00.000Z (3m 5s ago)."""
    iso = datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds")
    return f"{iso.replace('+00:00', 'Z')} ({age(epoch_s, now_s)})"


@locks_app.command("list")
def list_cmd(
    ctx: typer.Context,
    status: Annotated[str, typer.Option(help="in-progress, failed or all")] = "all",
    stuck_only: Annotated[
        bool,
        typer.Option(help="Only IN_PROGRESS records whose lease expired (no FAILED records)."),
    ] = False,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many.")] = 100,
    table: TableOption = None,
    stack: StackOption = DEFAULT_STACK,
    dsn: DsnOption = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the records as JSON (full ids, every field, times in UTC): "
            '{"records": [...], "more": true when --limit cut the list, "source": where}.',
        ),
    ] = False,
) -> None:
    """List pending work without a Scan. The id column is never cut: it is what `locks show`
    and `locks reset` take (SCOPE#KEY: give SCOPE and KEY; a sha256: or caller|key KEY with
    --stored)."""
    wanted = {"in-progress": [Status.IN_PROGRESS], "failed": [Status.FAILED]}.get(
        status, [Status.IN_PROGRESS, Status.FAILED] if status == "all" else None
    )
    if wanted is None:
        raise CliError(f"--status must be in-progress, failed or all, not {status!r}")
    if stuck_only:
        if status == "failed":
            raise CliError("--stuck-only lists IN_PROGRESS records only; drop --status failed")
        wanted = [Status.IN_PROGRESS]
    dsn = store_dsn(ctx, dsn, table, stack)
    records: list[StoredRecord] = []
    with database_errors(dsn):
        store, where = open_store(ctx, table, stack, dsn)
        for wanted_status in wanted:  # one more than --limit tells whether more exist
            more = limit + 1 - len(records)
            records.extend(store.list_pending(wanted_status, stuck_only=stuck_only, limit=more))
            if len(records) > limit:
                break
    now = time.time()
    if as_json:
        listing = {
            "records": [_record_data(r, now) for r in records[:limit]],
            "more": len(records) > limit,
            "source": where,
        }
        stdout().print_json(json.dumps(listing, default=repr))
        return
    longest_id = max((len(r.record_id) for r in records[:limit]), default=2)
    grid = Table(title="pending idempotency records")
    grid.add_column("id", no_wrap=True, min_width=longest_id)
    for column in ("status", "fence", "attempts", "owner", "lease", "error"):
        # short values are never broken; the owner and the error fold
        grid.add_column(column, overflow="fold", no_wrap=column not in ("owner", "error"))
    for r in records[:limit]:
        error = f"{r.error.type}: {r.error.message}" if r.error else ""
        if r.error and not r.error.retryable:
            error += " (permanent)"
        lease = r.lease_expires_at_ms if r.status is Status.IN_PROGRESS else None
        grid.add_row(  # keys, owners and errors are the application's text, never markup
            Text(r.record_id),
            r.status.value,
            str(r.fence),
            str(r.attempts),
            Text(r.owner or "-"),
            "-" if lease is None else age(lease / 1000, now),
            Text(error),
        )
    out = stdout()
    # a console too narrow for the ids and the other columns' minimum gets wider (a terminal
    # wraps the long lines) rather than cut an id
    out.width = max(out.width, longest_id + OTHER_COLUMNS_WIDTH)
    out.print(grid)
    if len(records) > limit:
        out.print(f"showing {limit}; more exist: raise --limit ({where})", markup=False)
    else:
        out.print(f"{len(records)} record(s) in {where}", markup=False)


def _record_json(record: StoredRecord, now_s: float | None = None) -> str:
    """The record as JSON; each epoch time is followed by its UTC ISO time and age."""
    return json.dumps(_record_data(record, now_s), default=repr, indent=2)


def _record_data(record: StoredRecord, now_s: float | None = None) -> dict[str, object]:
    """The record's fields for JSON; each epoch time is followed by its UTC ISO time and age."""
    now = time.time() if now_s is None else now_s
    data: dict[str, object] = {}
    for name, value in asdict(record).items():
        data[name] = value
        per_second = TIME_FIELDS.get(name)
        if per_second and isinstance(value, int):
            data[name.rsplit("_", 1)[0]] = when(value / per_second, now)
    data["status"] = record.status.value
    # The recovery points in order, each with its decoded result and its time: which step the
    # key stopped after is what a person asks of a stuck key.
    data["steps"] = [_step_data(record.steps[position], now) for position in sorted(record.steps)]
    result, undecodable = record.decoded_result()  # never raises, whatever was stored
    data["result"] = result
    if undecodable:
        data["result_undecodable"] = undecodable
    return data


def _step_data(point: StepPoint, now: float) -> dict[str, object]:
    try:
        result: object = point.result
    except Exception as exc:  # shown, never raised: a point written by another version
        result = f"<undecodable: {type(exc).__name__}>"
    return {
        "position": point.position,
        "name": point.name,
        "fence": point.fence,
        "at": when(point.at_ms / 1000, now),
        "result": result,
    }


def stored_key(key: str, stored: bool) -> str:
    """The key the record is stored under: a business key goes through `storable_key`, as at
    every entry point, so `sha256:<digest of K>` typed as a business key never names K's
    record (and `reset` never frees K instead); `--stored` takes it as it is."""
    return key if stored else storable_key(key)


def _hint(key: str, stored: bool) -> str:
    """For a miss on a key that reads like a stored hashed one: how to name that record."""
    if stored or not key.startswith(HASHED_PREFIX):
        return ""
    return f" (a business key; for the record stored as {key}, as `locks list` shows it: --stored)"


@locks_app.command("show")
def show_cmd(
    ctx: typer.Context,
    scope: Annotated[str, typer.Argument(help="The consumer's scope, e.g. orders")],
    key: KeyArgument,
    stored: StoredOption = False,
    table: TableOption = None,
    stack: StackOption = DEFAULT_STACK,
    dsn: DsnOption = None,
) -> None:
    """Print one key's record, with its times in UTC and their ages (TTL-expired = absent)."""
    dsn = store_dsn(ctx, dsn, table, stack)
    with database_errors(dsn):
        store, where = open_store(ctx, table, stack, dsn)
        record = store.get(scope, stored_key(key, stored))
    if record is None:
        raise CliError(f"no live record for {scope}#{key} in {where}{_hint(key, stored)}")
    stdout().print_json(_record_json(record))


@locks_app.command("reset")
def reset_cmd(
    ctx: typer.Context,
    scope: Annotated[str, typer.Argument()],
    key: KeyArgument,
    stored: StoredOption = False,
    table: TableOption = None,
    stack: StackOption = DEFAULT_STACK,
    dsn: DsnOption = None,
) -> None:
    """Make a FAILED record retryable, so the next delivery or a replay runs it."""
    dsn = store_dsn(ctx, dsn, table, stack)
    with database_errors(dsn):
        store, where = open_store(ctx, table, stack, dsn)
        reset = store.reset(scope, stored_key(key, stored))
    if not reset:
        raise CliError(
            f"{scope}#{key} is not FAILED in {where}; nothing to reset{_hint(key, stored)}"
        )
    stdout().print(f"reset {scope}#{key}: the next delivery will run it")
