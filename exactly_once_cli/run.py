"""`run` (what `make run` calls): the whole service on this machine, end to end, with a report.

Four parts, each checked against the execution log (the example functions' `append_effect`:
one entry per execution of the business effect): the Sales topic first (published with
duplicates, delivered to its Lambda subscriber in-process and to the orders queue by moto),
then the queues, then the HTTP API, then each Kinesis stream consumer (orders put again as a
producer's retry does, read by the local stream poller; the verdict also checks each
customer's orders took effect in the order put). Each verdict counts executions per expected
key, so a key
executed twice fails the run; `--lock-off` (a self-test of the harness: local_aws.lock_off)
turns the idempotency lock off in the function processes to show that it does. The queue table
is shared with `report`, which checks a workload sent by `workload` to a stack that `up` keeps
running.
"""

from __future__ import annotations

import time
from collections import Counter
from contextlib import ExitStack
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from exactly_once_cdk.outputs import TOPIC_ARN
from exactly_once_cli import workload_options as opts
from exactly_once_cli.common import fail, stdout
from exactly_once_cli.self_test import apply_lock_off
from exactly_once_cli.store_target import LocalStore, StoreOption
from exactly_once_cli.up import print_started, state_paths
from exactly_once_ops.local_state import AlreadyUp, StateLock
from local_aws.api_workload import ApiReport, ApiWorkload, describe, run_api_workload
from local_aws.demo import Workload, dead_letter_reasons
from local_aws.demo_report import DemoReport, build_report
from local_aws.demo_workload import CONSUMERS, SentWorkload, send_workload
from local_aws.local_deploy import ROOT, DeployError
from local_aws.local_postgres import LocalPostgres
from local_aws.local_stack import LocalStack
from local_aws.poller import Poller, describe_bindings, wait_until_drained
from local_aws.serve import long_lived_postgres, serve, start_apis, start_delivery, up_state
from local_aws.signals import terminate_on_signals
from local_aws.sns_report import TopicReport, build_topic_report, describe_receiver, verdict
from local_aws.sns_worker import SnsDelivery
from local_aws.sns_workload import TopicWorkload, publish_topic_workload, topic_receivers
from local_aws.stream_bindings import StreamBinding, describe_stream_bindings
from local_aws.stream_report import (
    StreamReport,
    build_stream_report,
    describe_stream,
    stream_verdict,
)
from local_aws.stream_worker import StreamWorkers
from local_aws.stream_workload import StreamWorkload, put_stream_workload

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

LOG_DIR = ROOT / "build" / "local-logs"
TOPIC = "Sales"  # the topic the sales workload is made for (orderId bodies)


def print_sent(workload: SentWorkload, console: Console) -> None:
    for batch in workload.batches:
        console.print(
            f"[green]✓[/] sent {batch.sent} messages to {batch.consumer} "
            f"({batch.duplicates} duplicates, {batch.poison} poison) "
            f"at {batch.throughput:.0f} msg/s"
        )


def drain(sqs: SQSClient, queue_urls: list[str], total: int, timeout_s: float) -> bool:
    """Wait until the queues are empty, with a progress bar; False at the timeout."""
    with Progress(
        SpinnerColumn(),
        TextColumn("draining: {task.fields[backlog]} left"),
        BarColumn(),
        TimeElapsedColumn(),
        console=stdout(),
        transient=True,
    ) as progress:
        task = progress.add_task("drain", total=total, backlog="?")
        return wait_until_drained(
            sqs,
            queue_urls,
            timeout_s=timeout_s,
            on_tick=lambda n: progress.update(task, completed=total - n, backlog=n),
        )


def run_topic(
    stack: LocalStack,
    poller: Poller,
    delivery: SnsDelivery,
    workload: TopicWorkload,
    *,
    timeout_s: float,
    keep: bool,
    console: Console,
) -> TopicReport:
    """Publish the sales, wait until every receiver is done, and check them.

    Runs before the queue workload and alone, so the DLQs' and the counters' changes over it
    are the topic's own (the orders consumer serves both).
    """
    spec = stack.app.topic(TOPIC)
    receivers = topic_receivers(spec, delivery.bindings, poller.bindings, stack.outputs)
    started = time.monotonic()
    consumed, delivered = poller.totals_by_consumer(), delivery.totals_by_subscriber()
    sqs = stack.sqs()
    sent = publish_topic_workload(
        stack.client("sns"),
        sqs,
        spec.id,
        stack.outputs[f"{spec.id}{TOPIC_ARN}"],
        receivers,
        workload,
    )
    console.print(
        f"[green]✓[/] published {sent.published} messages to {sent.topic} ({sent.duplicates} "
        f"sales published twice, {sent.poison} poison) at {sent.throughput:.0f} msg/s; "
        f"delivered {sent.redelivered} of them again (same MessageId) to "
        f"{', '.join(r.name for r in receivers)}"
    )
    total = (sent.published + sent.redelivered) * len(receivers)
    drained = drain(sqs, [r.delivery_url for r in receivers], total, timeout_s)
    if not keep:
        delivery.stop()  # every delivery's counts are in once its workers have stopped
    counts = {
        name: dict(now - consumed.get(name, Counter()))
        for name, now in poller.totals_by_consumer().items()
    }
    counts |= {
        name: dict(now - delivered.get(name, Counter()))
        for name, now in delivery.totals_by_subscriber().items()
    }
    return build_topic_report(
        sqs,
        stack.ledger(),
        sent,
        counts=counts,
        drained=drained,
        elapsed_s=time.monotonic() - started,
    )


def render_topic(report: TopicReport, console: Console) -> None:
    sent = report.sent
    receivers = ", ".join(r.receiver.name for r in report.receivers)
    table = Table(title=f"Topic {sent.topic} (SNS to {receivers})", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("messages published", str(sent.published))
    table.add_row("  of which a sale published again (new MessageId)", str(sent.duplicates))
    table.add_row("  of which poison (not JSON)", str(sent.poison))
    table.add_row("delivered again (same MessageId) to each subscriber", str(sent.redelivered))
    for receiver in report.receivers:
        for what, count in describe_receiver(receiver):
            table.add_row(what, count)
    console.print(table)
    line = verdict(report)
    head, rest = line.split(":", 1)
    colour = "green" if report.ok else "red"
    console.print(f"[bold {colour}]{head}[/]:{escape(rest)} ({report.elapsed_s:.1f}s)")


def run_stream(
    stack: LocalStack,
    streams: StreamWorkers,
    binding: StreamBinding,
    workload: StreamWorkload,
    *,
    timeout_s: float,
    console: Console,
) -> StreamReport:
    """Put the orders to the binding's stream, wait until its worker has read them all (a
    round that started after the last put found nothing), and check them."""
    started = time.monotonic()
    sqs = stack.sqs()
    dead_letter_url = binding.dead_letter_queue_url or ""
    on_failure_url = binding.on_failure_queue_url
    on_failure_before = (
        0 if on_failure_url is None else sum(dead_letter_reasons(sqs, on_failure_url).values())
    )
    before = streams.totals_by_label().get(binding.label, Counter())
    sent = put_stream_workload(
        stack.client("kinesis"), binding.consumer, binding.stream_name, workload
    )
    console.print(
        f"[green]✓[/] put {sent.put} records to {binding.consumer}'s stream {sent.stream_name} "
        f"({sent.duplicates} orders put again, {sent.poison} poison, {sent.shards} shard(s)) "
        f"at {sent.throughput:.0f} rec/s"
    )
    with console.status(f"{binding.consumer}: reading the stream..."):
        read = streams.wait_until_read(sent.finished_at, timeout_s)
    now = streams.totals_by_label().get(binding.label, Counter())
    return build_stream_report(
        sqs,
        stack.ledger(),
        sent,
        scope=binding.scope,
        dead_letter_url=dead_letter_url,
        on_failure_url=on_failure_url,
        on_failure_before=on_failure_before,
        counts=dict(now - before),
        read=read,
        elapsed_s=time.monotonic() - started,
    )


def render_stream(report: StreamReport, console: Console) -> None:
    sent = report.sent
    table = Table(
        title=f"Stream {sent.stream_name} (Kinesis to {sent.consumer})", show_header=False
    )
    table.add_column("what")
    table.add_column("count", justify="right")
    for what, count in describe_stream(report):
        table.add_row(what, count)
    console.print(table)
    head, rest = stream_verdict(report).split(":", 1)
    colour = "green" if report.ok else "red"
    console.print(f"[bold {colour}]{head}[/]:{escape(rest)} ({report.elapsed_s:.1f}s)")


def render(report: DemoReport, console: Console, title: str = "Exactly-once local run") -> None:
    t = report.totals

    def count(key: str) -> str:
        return "-" if t is None else str(t.get(key, 0))

    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("messages sent", str(sum(report.sent.values())))
    table.add_row("  of which duplicates (same id)", str(report.duplicates_planned))
    table.add_row("  of which poison", str(report.poison_planned))
    table.add_row("deliveries handed to handlers", count("received"))
    table.add_row("executed (ran and completed)", count("processed"))
    table.add_row("duplicates suppressed", count("duplicate"))
    table.add_row("in-progress duplicates deferred", count("in_progress"))
    table.add_row("transient failures retried", count("failed"))
    table.add_row("takeovers of expired locks", count("takeovers"))
    table.add_row("lease lost at completion", count("lease_lost"))
    for name, reasons in report.dead_letters.items():
        detail = ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())) or "none"
        table.add_row(f"in {name} DLQ from these messages", f"{sum(reasons.values())} ({detail})")
        if report.in_run is not None:  # `run`: the topic's phase came first
            topic = report.in_run[name] - sum(reasons.values())
            table.add_row(
                f"  in {name} DLQ this run ({topic} from the topic)",
                str(report.in_run[name]),
            )
    ledger = report.ledger
    table.add_row("business keys expected", str(ledger.expected))
    table.add_row("keys executed exactly once", str(ledger.executed_once))
    table.add_row("keys executed more than once", str(len(ledger.double_effects)))
    table.add_row("keys never executed (lost)", str(len(ledger.missing)))
    console.print(table)
    dead = sum(sum(r.values()) for r in report.dead_letters.values())
    verdict = (
        f"[bold green]EXACTLY ONCE[/]: {ledger.executed_once}/{ledger.expected} keys executed "
        f"once, {report.poison_planned} poison message(s) in the DLQs"
        if report.ok
        else f"[bold red]CHECK FAILED[/]: drained={report.drained}, "
        f"executed twice or more: {len(ledger.double_effects)} "
        f"{sorted(ledger.double_effects)[:5]}, missing={sorted(ledger.missing)[:5]}, "
        f"unexpected={sorted(ledger.unexpected)[:5]}, "
        f"dead-lettered {dead} of {report.poison_planned} poison"
    )
    console.print(f"{verdict} ({report.elapsed_s:.1f}s)")


def render_api(report: ApiReport, console: Console, name: str, endpoint: str) -> None:
    table = Table(title=f"{name} at {endpoint} (Idempotency-Key)", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    for what, count in describe(report):
        table.add_row(what, count)
    ledger = report.ledger
    assert ledger is not None
    table.add_row("keys executed exactly once", f"{ledger.executed_once}/{ledger.expected}")
    table.add_row("keys executed more than once", str(len(ledger.double_effects)))
    table.add_row("keys whose clients got different bodies", str(len(report.inconsistent_keys)))
    console.print(table)
    verdict = (
        f"[bold green]API EXACTLY ONCE[/]: {ledger.executed_once}/{ledger.expected} keys "
        "executed once, every client of a key got the same response"
        if report.ok
        else f"[bold red]API CHECK FAILED[/]: missing={sorted(ledger.missing)[:3]}, "
        f"executed twice or more: {len(ledger.double_effects)} "
        f"{sorted(ledger.double_effects)[:3]}, "
        f"inconsistent={report.inconsistent_keys[:3]}, "
        f"422 {report.reused_refused}/{report.reused_planned}, "
        f"400 for no key: {report.missing_key_refused}"
    )
    console.print(f"{verdict} ({report.elapsed_s:.1f}s)")


def run_cmd(
    orders: opts.Orders = 200,
    payments: opts.Payments = 40,
    sales: opts.Sales = 40,
    redeliveries: opts.Redeliveries = 5,
    duplicates: opts.Duplicates = 0.25,
    poison: opts.Poison = 2,
    transient: opts.Transient = 0.05,
    work_ms: opts.WorkMs = 20,
    workers: Annotated[
        int, typer.Option(min=1, max=8, help="Poller (and SNS delivery) processes per function.")
    ] = 2,
    seed: opts.Seed = 7,
    stream_orders: Annotated[
        int,
        typer.Option(
            min=0, help="Records put to each Kinesis stream consumer's stream (0: no stream part)."
        ),
    ] = 60,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the queues to drain.")] = 240,
    keep: Annotated[
        bool,
        typer.Option(
            help="After the report, keep the stack up and consuming (like `up`, in the "
            "foreground) until Ctrl-C, SIGTERM or `eonce down`."
        ),
    ] = False,
    store: StoreOption = LocalStore.dynamodb,
    lock_off: Annotated[
        bool,
        typer.Option(
            "--lock-off",
            help="Self-test of the verdicts: run the functions with the idempotency lock off "
            "(every delivery acquires a record of its own), so duplicates execute again and "
            "the run must FAIL.",
        ),
    ] = False,
) -> None:
    """Run everything locally: moto + DynamoDB Local, deploy, poll, publish and send a workload,
    report.

    Exits 1 if a check failed, or if the deploy failed (one line: the CDK CLI's reason).
    SIGTERM and SIGHUP stop it as Ctrl-C does, children included.
    The SNS retry delays are short locally (EONCE_SNS_RETRY_DELAYS, default "0.5,1").
    `--store postgres` also starts a PostgreSQL server, migrated, as every function's
    idempotency store (IDEMPOTENCY_DSN), and checks the ledger there (a temporary cluster,
    or with --keep the state folder's postgres/).
    """
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
    topic_workload = TopicWorkload(
        sales=sales,
        duplicate_ratio=duplicates,
        redeliveries=redeliveries,
        poison=min(poison, 1),  # one per topic: it reaches every subscriber's DLQ
        transient_ratio=transient,
        work_ms=work_ms,
        seed=seed,
    )
    if lock_off and keep:
        raise typer.BadParameter(
            "a --lock-off run is a self-test: it leaves no stack up with the lock off",
            param_hint="--keep",
        )
    apply_lock_off(lock_off)  # the function processes (spawned, or the gateway's child) inherit it
    if lock_off:
        console.print(
            "[bold yellow]SELF-TEST[/]: the idempotency lock is OFF in every function process; "
            "each verdict below must FAIL"
        )
    started = time.monotonic()
    with terminate_on_signals(), ExitStack() as running:
        paths = state_paths() if keep else None
        if paths is not None:  # claimed first: no deploy if a stack is up already
            try:
                running.enter_context(StateLock(paths))
            except AlreadyUp as exc:
                fail(str(exc))
        postgres = None
        if store is LocalStore.postgres:
            postgres = long_lived_postgres(paths) if paths is not None else LocalPostgres()
        try:
            with console.status(f"Starting {store.servers}, deploying the CDK app..."):
                stack = running.enter_context(LocalStack(postgres=postgres))
        except DeployError as exc:  # one line with the CDK CLI's reason, not two tracebacks
            fail(str(exc))
        console.print(f"[green]✓[/] stack deployed in {time.monotonic() - started:.1f}s")
        if stack.postgres is not None:
            console.print(
                f"[green]✓[/] PostgreSQL (the idempotency store and the ledger) at "
                f"{escape(stack.postgres.dsn)}, schema migrated"
            )
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        for old in LOG_DIR.glob("*.log"):
            old.unlink()
        bindings = stack.bindings()
        poller = running.enter_context(
            Poller(bindings, stack.aws_environment, workers=workers, log_dir=LOG_DIR)
        )
        console.print(
            f"[green]✓[/] poller: {workers} worker process(es) per function "
            f"({describe_bindings(bindings)}); function logs in {LOG_DIR.relative_to(ROOT)}/"
        )
        delivery = start_delivery(
            stack, workers, LOG_DIR, running, lambda line: console.print(f"[green]✓[/] {line}")
        )
        apis = start_apis(
            stack, LOG_DIR, running, lambda line: console.print(f"[green]✓[/] {line}")
        )
        stream_bindings = stack.stream_bindings() if stream_orders else []
        streams = running.enter_context(
            StreamWorkers(stream_bindings, stack.aws_environment, log_dir=LOG_DIR)
        )
        if stream_bindings:
            console.print(
                "[green]✓[/] stream poller: 1 worker process per stream function "
                f"({describe_stream_bindings(stream_bindings)})"
            )
        sqs = stack.sqs()
        run_baseline = {
            name: dict(dead_letter_reasons(sqs, stack.outputs[f"{name}DeadLetterQueueUrl"]))
            for name in CONSUMERS
        }
        topic_report = (
            run_topic(
                stack,
                poller,
                delivery,
                topic_workload,
                timeout_s=timeout,
                keep=keep,
                console=console,
            )
            if sales
            else None
        )
        sent = send_workload(sqs, stack.outputs, workload, totals_before=poller.totals())
        print_sent(sent, console)
        queue_urls = [stack.outputs[f"{name}QueueUrl"] for name in sent.sent]
        drained = drain(sqs, queue_urls, sum(sent.sent.values()), timeout)
        if not keep:
            poller.stop()  # every batch's counts are in once the workers have stopped
        report = build_report(
            sqs,
            stack.ledger(),
            stack.outputs,
            sent,
            totals=poller.totals(),
            drained=drained,
            elapsed_s=time.monotonic() - started,
            run_baseline=run_baseline,
        )
        render(report, console)
        api_reports = [
            run_api_workload(
                api.endpoint,
                stack.ledger(),
                ApiWorkload(seed=seed, work_ms=work_ms),
            )
            for api in apis
        ]
        for api, api_report in zip(apis, api_reports, strict=True):
            render_api(api_report, console, api.binding.api, api.endpoint)
        if topic_report is not None:
            render_topic(topic_report, console)
        stream_workload = StreamWorkload(
            orders=stream_orders,
            duplicate_ratio=duplicates,
            poison=poison,
            transient_ratio=transient,
            work_ms=work_ms,
            seed=seed,
        )
        stream_reports = [
            run_stream(stack, streams, binding, stream_workload, timeout_s=timeout, console=console)
            for binding in stream_bindings
        ]
        for stream_report in stream_reports:
            render_stream(stream_report, console)
        if paths is not None:
            state = up_state(stack, poller, {"functions": LOG_DIR})
            console.print("\nThe local stack stays up, consuming:")
            print_started(state, console)
            console.print("Ctrl-C here (or `eonce down` elsewhere) stops it.")
            serve(paths, state, poller, delivery)
    topic_ok = topic_report is None or topic_report.ok
    streams_ok = all(r.ok for r in stream_reports)
    if not report.ok or not all(r.ok for r in api_reports) or not topic_ok or not streams_ok:
        raise typer.Exit(1)
