"""`workload` and `report`: `run`'s two halves, against a stack that stays up (`eonce up`).

`workload` sends the demo workload and records what must hold; `report` waits for the queues
to drain and prints `run`'s table, checked against the ledger (PostgreSQL's, when the local
stack runs on that store).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from exactly_once_cdk.outputs import LEDGER_TABLE
from exactly_once_cli import workload_options as opts
from exactly_once_cli.common import CliError, StackOption, aws_target, stdout
from exactly_once_cli.run import drain, print_sent, render
from exactly_once_cli.store_target import database_errors, recorded_dsn
from exactly_once_cli.up import state_paths
from exactly_once_ops.local_state import serving
from exactly_once_ops.targets import DEFAULT_STACK, stack_outputs
from local_aws.demo import DynamoLedger, LedgerReader, Workload
from local_aws.demo_report import build_report
from local_aws.demo_workload import CONSUMERS, SentWorkload, send_workload
from local_aws.pg_ledger import PostgresLedger

RecordOption = Annotated[
    Path | None,
    typer.Option(
        "--record",
        help="Where the workload's expected keys are kept (default: workload.json in the "
        "state folder, .local/).",
        dir_okay=False,
    ),
]


def _outputs(ctx: typer.Context, stack: str) -> dict[str, str]:
    outputs = stack_outputs(aws_target(ctx).cloudformation(), stack)
    missing = [name for name in CONSUMERS if f"{name}QueueUrl" not in outputs]
    if missing or LEDGER_TABLE not in outputs:
        raise CliError(
            f"stack {stack!r} is not this repository's stack (it needs the consumers "
            f"{', '.join(CONSUMERS)} and a {LEDGER_TABLE} output)"
        )
    return outputs


def _totals(ctx: typer.Context, stack: str) -> dict[str, int] | None:
    """The local poller's counts since `up`, when the target is the `up` stack."""
    local = serving(aws_target(ctx).endpoint_url, stack)
    if local is None or local[1] is None:
        return None
    return local[1].totals()


def workload_cmd(
    ctx: typer.Context,
    orders: opts.Orders = 200,
    payments: opts.Payments = 40,
    duplicates: opts.Duplicates = 0.25,
    poison: opts.Poison = 2,
    transient: opts.Transient = 0.05,
    work_ms: opts.WorkMs = 20,
    seed: opts.Seed = 7,
    stack: StackOption = DEFAULT_STACK,
    record: RecordOption = None,
) -> None:
    """Send `run`'s demo workload with fresh keys; record what `report` must find.

    Duplicates, poison and transient failures as in `run`.
    """
    outputs = _outputs(ctx, stack)
    path = record or state_paths().workload
    workload = Workload(
        orders=orders,
        payments=payments,
        duplicate_ratio=duplicates,
        poison=poison,
        transient_ratio=transient,
        work_ms=work_ms,
        seed=seed,
    )
    sent = send_workload(
        aws_target(ctx).sqs(), outputs, workload, totals_before=_totals(ctx, stack)
    )
    sent.save(path)
    console = stdout()
    print_sent(sent, console)
    console.print(
        f"recorded run {sent.run_id} ({len(sent.expected_keys)} keys expected) in {path}; "
        "`eonce report` checks it"
    )


def report_cmd(
    ctx: typer.Context,
    stack: StackOption = DEFAULT_STACK,
    record: RecordOption = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the queues to drain.")] = 240,
) -> None:
    """Wait for the queues to drain, then print `run`'s report for the recorded workload.

    Exits 1 if the ledger check failed or the queues did not drain in time.
    """
    path = record or state_paths().workload
    if not path.is_file():
        raise CliError(f"no workload recorded at {path}: run `eonce workload` first")
    sent = SentWorkload.load(path)
    target = aws_target(ctx)
    outputs = _outputs(ctx, stack)
    sqs = target.sqs()
    queue_urls = [outputs[f"{name}QueueUrl"] for name in sent.sent]
    drained = drain(sqs, queue_urls, sum(sent.sent.values()), timeout)
    dsn = recorded_dsn(target.endpoint_url, stack)
    ledger: LedgerReader
    if dsn:
        ledger = PostgresLedger(dsn)
    else:
        ddb = target.client("dynamodb", target.endpoint("dynamodb", outputs))
        ledger = DynamoLedger(ddb, outputs[LEDGER_TABLE])
    elapsed = time.time() - datetime.fromisoformat(sent.sent_at).timestamp()
    with database_errors(dsn):
        report = build_report(
            sqs,
            ledger,
            outputs,
            sent,
            totals=_totals(ctx, stack),
            drained=drained,
            elapsed_s=elapsed,
        )
    render(report, stdout(), title=f"Exactly-once workload {sent.run_id}")
    if not report.ok:
        raise typer.Exit(1)
