"""`run` (what `make run` calls): the whole service on this machine, end to end, with a report."""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from exactly_once_cli.common import stdout
from exactly_once_ops.send import send_messages
from local_aws.demo import (
    LedgerCheck,
    Planned,
    Workload,
    check_ledger,
    dead_letter_reasons,
    plan_orders,
    plan_payments,
)
from local_aws.local_deploy import ROOT
from local_aws.local_stack import LocalStack
from local_aws.poller import Poller, wait_until_drained

LOG_DIR = ROOT / "build" / "local-logs"


@dataclass
class DemoReport:
    sent: dict[str, int]
    duplicates_planned: int
    poison_planned: int
    totals: dict[str, int]
    dead_letters: dict[str, dict[str, int]]
    ledger: LedgerCheck
    drained: bool
    elapsed_s: float

    @property
    def ok(self) -> bool:
        dead = sum(sum(r.values()) for r in self.dead_letters.values())
        return self.drained and self.ledger.ok and dead == self.poison_planned


def run_demo(
    workload: Workload,
    workers: int,
    timeout_s: float,
    console: Console,
    keep: bool = False,
    stack: LocalStack | None = None,
) -> DemoReport:
    """Run the workload; on a stack of its own unless one is given (then it is left running)."""
    started = time.monotonic()
    rng = random.Random(workload.seed)
    run_id = uuid.uuid4().hex[:6]
    own = stack is None
    if stack is None:
        with console.status("Starting moto and DynamoDB Local, deploying the CDK app..."):
            stack = LocalStack().start()
        console.print(f"[green]✓[/] stack deployed in {time.monotonic() - started:.1f}s")
    try:
        sqs, ddb = stack.sqs(), stack.ddb()
        bindings = stack.bindings()
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        for old in LOG_DIR.glob("*.log"):
            old.unlink()
        poller = Poller(bindings, stack.aws_environment, workers=workers, log_dir=LOG_DIR).start()
        console.print(
            f"[green]✓[/] poller: {workers} worker process(es) per function "
            f"({', '.join(f'batch {b.batch_size}, timeout {b.timeout_s}s' for b in bindings)}); "
            f"function logs in {LOG_DIR.relative_to(ROOT)}/"
        )
        plans = {
            "Orders": plan_orders(workload, run_id, rng),
            "Payments": plan_payments(workload, run_id, rng),
        }
        sent = _send(stack, plans, console)
        queue_urls = [stack.outputs[f"{name}QueueUrl"] for name in plans]
        with Progress(
            SpinnerColumn(),
            TextColumn("draining: {task.fields[backlog]} left"),
            BarColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            task = progress.add_task("drain", total=sum(sent.values()), backlog="?")
            drained = wait_until_drained(
                sqs,
                queue_urls,
                timeout_s=timeout_s,
                on_tick=lambda n: progress.update(
                    task, completed=sum(sent.values()) - n, backlog=n
                ),
            )
        poller.stop()
        expected = set().union(*(p.keys for p in plans.values()))
        report = DemoReport(
            sent=sent,
            duplicates_planned=sum(p.duplicates for p in plans.values()),
            poison_planned=sum(p.poison for p in plans.values()),
            totals=dict(poller.totals()),
            dead_letters={
                name: dict(dead_letter_reasons(sqs, stack.outputs[f"{name}DeadLetterQueueUrl"]))
                for name in plans
            },
            ledger=check_ledger(ddb, stack.outputs["LedgerTableName"], expected),
            drained=drained,
            elapsed_s=time.monotonic() - started,
        )
        if keep:
            _serve(stack, console)
        return report
    finally:
        if own:
            stack.stop()


def _send(stack: LocalStack, plans: dict[str, Planned], console: Console) -> dict[str, int]:
    sent: dict[str, int] = {}
    for name, plan in plans.items():
        url = stack.outputs[f"{name}QueueUrl"]
        report = send_messages(stack.sqs(), url, plan.messages, concurrency=4)
        if report.failed:
            raise RuntimeError(f"{len(report.failed)} messages could not be sent to {name}")
        sent[name] = report.sent
        console.print(
            f"[green]✓[/] sent {report.sent} messages to {name} "
            f"({plan.duplicates} duplicates, {plan.poison} poison) "
            f"at {report.throughput:.0f} msg/s"
        )
    return sent


def _serve(stack: LocalStack, console: Console) -> None:
    console.print("\nThe local stack stays up. In another shell:")
    for key, value in stack.aws_environment.items():
        if key.startswith("AWS_ENDPOINT") or key in ("AWS_REGION",):
            console.print(f"  export {key}={value}")
    console.print("  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing")
    console.print("Press Ctrl-C to stop.")
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        return


def render(report: DemoReport, console: Console) -> None:
    t = report.totals
    table = Table(title="Exactly-once local run", show_header=True, header_style="bold")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("messages sent", str(sum(report.sent.values())))
    table.add_row("  of which duplicates (same id)", str(report.duplicates_planned))
    table.add_row("  of which poison", str(report.poison_planned))
    table.add_row("deliveries handed to handlers", str(t.get("received", 0)))
    table.add_row("executed (ran and completed)", str(t.get("processed", 0)))
    table.add_row("duplicates suppressed", str(t.get("duplicate", 0)))
    table.add_row("in-progress duplicates deferred", str(t.get("in_progress", 0)))
    table.add_row("transient failures retried", str(t.get("failed", 0)))
    table.add_row("takeovers of expired locks", str(t.get("takeovers", 0)))
    table.add_row("lease lost at completion", str(t.get("lease_lost", 0)))
    for name, reasons in report.dead_letters.items():
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())) or "none"
        table.add_row(f"in {name} DLQ", f"{sum(reasons.values())} ({detail})")
    ledger = report.ledger
    table.add_row("business keys expected", str(ledger.expected))
    table.add_row("keys with exactly one effect", str(ledger.executed_once))
    table.add_row("keys with more than one effect", str(len(ledger.double_effects)))
    table.add_row("keys with no effect (lost)", str(len(ledger.missing)))
    console.print(table)
    verdict = (
        f"[bold green]EXACTLY ONCE[/]: {ledger.executed_once}/{ledger.expected} keys took effect "
        f"once, {report.poison_planned} poison message(s) in the DLQs"
        if report.ok
        else f"[bold red]CHECK FAILED[/]: drained={report.drained}, "
        f"double={sorted(ledger.double_effects)[:5]}, missing={sorted(ledger.missing)[:5]}"
    )
    console.print(f"{verdict} ({report.elapsed_s:.1f}s)")


def run_cmd(
    orders: Annotated[
        int, typer.Option(min=0, help="Messages to the orders (standard) queue.")
    ] = 200,
    payments: Annotated[
        int, typer.Option(min=0, help="Messages to the payments (FIFO) queue.")
    ] = 40,
    duplicates: Annotated[
        float, typer.Option(min=0.0, max=0.9, help="Share of messages repeating a business id.")
    ] = 0.25,
    poison: Annotated[int, typer.Option(min=0, help="Poison messages per queue.")] = 2,
    transient: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share that fail once, then succeed.")
    ] = 0.05,
    work_ms: Annotated[int, typer.Option(min=0, help="Simulated I/O per record (ms).")] = 20,
    workers: Annotated[int, typer.Option(min=1, max=8, help="Poller processes per function.")] = 2,
    seed: Annotated[int, typer.Option(help="Seed for the workload.")] = 7,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the queues to drain.")] = 240,
    keep: Annotated[bool, typer.Option(help="Keep the local stack up after the report.")] = False,
) -> None:
    """Run everything locally: moto + DynamoDB Local, deploy, poll, send a workload, report."""
    console = stdout()
    workload = Workload(
        orders=orders,
        payments=payments,
        duplicate_ratio=duplicates,
        poison=poison,
        transient_ratio=transient,
        work_ms=work_ms,
        seed=seed,
    )
    report = run_demo(workload, workers, timeout, console, keep=keep)
    render(report, console)
    if not report.ok:
        raise typer.Exit(1)
