"""`complete`: finish resumable keys that nobody will deliver again (the completer, by hand).

`eonce complete --module shop.checkout:checkout` imports the module (from the current
directory, as `python -c` would), takes the `@resumable` it names (or, without `:NAME`, every
resumable the module defines) and runs `exactly_once.steps.completer` on the store the other
commands read (the stack's table, or --dsn). Each key is one line: completed, still failing
(recorded FAILED again) or skipped with its reason (a live holder, no stored input, ...).
Exit 0 when nothing is still failing, 1 when something is (a cron job's alarm), 2 for a usage
error. `--dry-run` lists the keys it would take, and takes none.
"""

from __future__ import annotations

import contextlib
import json
import os
import pkgutil
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from exactly_once_cli.common import FAILURE_EXIT, CliError, StackOption, stdout
from exactly_once_cli.locks import TableOption, open_store, store_dsn
from exactly_once_cli.store_target import DsnOption, database_errors
from exactly_once_ops.targets import DEFAULT_STACK

if TYPE_CHECKING:
    from exactly_once.steps.resumable import Resumable

ModuleOption = Annotated[
    list[str],
    typer.Option(
        "--module",
        "-m",
        help="MODULE:NAME of a @resumable function (repeatable), or MODULE for every resumable "
        "it defines; imported from the current directory.",
    ),
]


def resumables_of(spec: str) -> list[Resumable[Any, Any]]:
    """The resumables `spec` (MODULE or MODULE:NAME) names; a usage error when none."""
    from exactly_once.steps.resumable import Resumable

    module_name, _, attribute = spec.partition(":")
    if not module_name:
        raise CliError(f"--module {spec!r}: expected MODULE or MODULE:NAME")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the user's code, as `python -c` finds it
    try:
        module = pkgutil.resolve_name(module_name)  # the user's module, as entry points are
    except Exception as exc:  # its import may raise anything: one line, never a traceback
        raise CliError(f"--module {spec!r}: cannot import {module_name}: {exc!r}") from exc
    if attribute:
        found = getattr(module, attribute, None)
        if not isinstance(found, Resumable):
            what = "nothing" if found is None else type(found).__name__
            raise CliError(
                f"--module {spec!r}: {attribute} is {what}, not a function decorated with "
                "@resumable(scope)"
            )
        return [found]
    found_all = [value for value in vars(module).values() if isinstance(value, Resumable)]
    if not found_all:
        raise CliError(f"--module {spec!r}: {module_name} defines no @resumable function")
    return found_all


def complete_cmd(
    ctx: typer.Context,
    module: ModuleOption,
    limit: Annotated[int, typer.Option(min=1, help="Take at most this many keys.")] = 100,
    failed: Annotated[
        bool,
        typer.Option(
            "--failed/--no-failed", help="Also run retryable FAILED keys (default), or not."
        ),
    ] = True,
    max_attempts: Annotated[
        int | None,
        typer.Option(min=1, help="Leave a key alone once it has been tried this many times."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the keys it would take; take none.")
    ] = False,
    table: TableOption = None,
    stack: StackOption = DEFAULT_STACK,
    dsn: DsnOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"outcomes": [...], "source": where}.')
    ] = False,
) -> None:
    """Finish abandoned keys of @resumable functions: keys whose holder died (lease expired)
    or failed retryably, taken over through the fenced acquire and run from the input they
    kept; their finished steps are not run again. A live holder is never disturbed."""
    from exactly_once.steps.completer import Completer

    chosen: dict[str, Resumable[Any, Any]] = {}
    for spec in module:
        for found in resumables_of(spec):
            chosen[found.scope] = found
    if not chosen:
        raise CliError("give --module MODULE:NAME (a @resumable function) at least once")
    dsn = store_dsn(ctx, dsn, table, stack)
    with database_errors(dsn):
        store, where = open_store(ctx, table, stack, dsn)
        completer = Completer(
            list(chosen.values()),
            store=store,
            retry_failed=failed,
            max_attempts=max_attempts,
            owner=f"eonce-complete:{os.getpid()}",
        )
        if dry_run:
            listed = list(completer.abandoned(limit))
            rows = [
                {"scope": c.resumable.scope, "key": c.key, "status": c.record.status.value}
                for c in listed
            ]
            _print(rows, f"{len(rows)} key(s) would be taken ({where})", as_json, where)
            return
        # The lock's metric lines (EMF, for CloudWatch in Lambda) go to stderr here: stdout is
        # the report's, and --json must stay one document.
        with contextlib.redirect_stdout(sys.stderr):
            report = completer.run(limit, log=False)
    rows = [asdict(outcome) for outcome in report.outcomes]
    _print(rows, f"{report.summary()} ({where})", as_json, where)
    if report.failing:
        raise typer.Exit(FAILURE_EXIT)


def _print(rows: list[dict[str, Any]], summary: str, as_json: bool, where: str) -> None:
    out = stdout()
    if as_json:
        out.print_json(json.dumps({"outcomes": rows, "source": where}, default=repr))
        return
    for row in rows:
        state = row.get("outcome") or row.get("status")
        line = f"{state:<10} {row['scope']}#{row['key']}"
        if row.get("fence") is not None:
            line += f"  fence {row['fence']}"
        if row.get("resumed_after"):
            line += f"  resumed after {row['resumed_after']} step(s)"
        if row.get("detail"):
            line += f"  {row['detail']}"
        out.print(Text(line))  # keys and errors are the application's text, never markup
    out.print(summary, markup=False)
