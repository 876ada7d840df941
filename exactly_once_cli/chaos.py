"""`chaos`: fault injection over the local stack, with a comparison table (and a docs page)."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from exactly_once_cli.common import stdout
from exactly_once_cli.self_test import apply_lock_off
from fault_injection.consumers import (
    CONSUMERS,
    GATE,
    POSTGRES_CONSUMERS,
    STEPS_CONSUMERS,
    by_names,
    defaults,
)
from fault_injection.page import write_page
from fault_injection.report import print_report
from fault_injection.runner import run_chaos
from fault_injection.settings import ChaosSettings, FaultRates, StoreKind, Workload

Rate = Annotated[float, typer.Option(min=0.0, max=1.0)]


class Source(StrEnum):
    """Where the workload comes from: the deployed Orders queue, or a Kinesis stream."""

    SQS = "sqs"
    KINESIS = "kinesis"


def chaos_cmd(
    messages: Annotated[
        int | None,
        typer.Option(
            min=1, help="Messages (kinesis: records) per consumer. Default 10000 (kinesis: 3000)."
        ),
    ] = None,
    consumers: Annotated[
        str | None,
        typer.Option(
            help=f"Comma-separated, from: {', '.join(CONSUMERS)} (on PostgreSQL: "
            f"{', '.join(POSTGRES_CONSUMERS)}; --workload steps: {', '.join(STEPS_CONSUMERS)}). "
            "Default: all of them."
        ),
    ] = None,
    duplicates: Annotated[
        float, typer.Option(min=0.0, max=0.9, help="Share of sends repeating an earlier body.")
    ] = 0.10,
    poison: Annotated[float, typer.Option(min=0.0, max=0.5, help="Share of poison.")] = 0.01,
    transient: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of keys that fail, then succeed.")
    ] = 0.05,
    crash: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of keys that SIGKILL their worker.")
    ] = 0.01,
    zombie: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of keys that SIGSTOP their worker.")
    ] = 0.003,
    throttle: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Share of DynamoDB requests throttled (on PostgreSQL: of the store's acquire, "
            "write and commit statements whose connection drops before they are sent).",
        ),
    ] = 0.05,
    lost_reply: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="PostgreSQL: share of the store's acquire, write, completion and commit "
            "statements applied, then their reply lost (kinesis: of the layer's DynamoDB "
            "requests).",
        ),
    ] = 0.01,
    delete_failure: Annotated[
        float,
        typer.Option(
            min=0.0, max=1.0, help="Share of SQS deletes dropped (kinesis: of checkpoints)."
        ),
    ] = 0.03,
    workers: Annotated[
        int | None,
        typer.Option(min=1, max=16, help="Worker processes. Default 6 (kinesis: 3 pollers)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for the plan and the injectors.")] = 7,
    work_ms: Annotated[int, typer.Option(min=0, help="Simulated I/O per record (ms).")] = 5,
    pause: Annotated[
        float | None,
        typer.Option(help="Zombie pause (s); default: the visibility timeout + 3 s."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each drain.")] = 3600,
    markdown: Annotated[
        Path | None, typer.Option(help="Also write the report as a Markdown page here.")
    ] = None,
    store: Annotated[
        StoreKind,
        typer.Option(
            help="The layer's idempotency store. postgres: a local PostgreSQL server, the "
            "effect written in the same transaction as the completion (write its page with "
            "--markdown docs/chaos-postgres.md)."
        ),
    ] = StoreKind.DYNAMODB,
    source: Annotated[
        Source,
        typer.Option(
            help="sqs: the deployed Orders queue. kinesis: a Kinesis stream read by pollers "
            "that lease its shards, with the order per shard checked too (write its page with "
            "--markdown docs/chaos-kinesis.md)."
        ),
    ] = Source.SQS,
    shards: Annotated[int, typer.Option(min=1, max=16, help="kinesis: the stream's shards.")] = 4,
    workload: Annotated[
        Workload,
        typer.Option(
            help="orders: one effect per key. steps: three ctx.step per key (charge, ship, "
            "email), crashes and zombies between and inside them, the books per (key, step) "
            "(write its page with --markdown docs/chaos-steps.md)."
        ),
    ] = Workload.ORDERS,
    lock_off: Annotated[
        bool,
        typer.Option(
            "--lock-off",
            help="Self-test of the books: the workers run with the layer's idempotency lock "
            "off (every delivery acquires a record of its own), so the layer's verdict must "
            "FAIL with keys executed more than once.",
        ),
    ] = False,
) -> None:
    """Inject crashes, zombies, throttles, lost deletes, duplicates and poison; check the books.

    Exits 1 when the layer's consumer (`layer`; with --workload steps, `steps`) breaks an
    invariant; the other consumers are measured for comparison.
    """
    rates = FaultRates(
        duplicates=duplicates,
        poison=poison,
        transient=transient,
        crash=crash,
        zombie=zombie,
        throttle=throttle,
        delete_failure=delete_failure,
        lost_reply=lost_reply,
    )
    if lock_off and markdown is not None:
        raise typer.BadParameter(
            "a --lock-off run is a self-test: it writes no docs page", param_hint="--markdown"
        )
    if source is Source.KINESIS:
        if workload is not Workload.ORDERS:
            raise typer.BadParameter("the kinesis run has one workload", param_hint="--workload")
        if store is not StoreKind.DYNAMODB:
            raise typer.BadParameter("the kinesis run is on DynamoDB", param_hint="--store")
        from exactly_once_cli.chaos_kinesis import run_kinesis

        apply_lock_off(lock_off)  # the pollers inherit it; an inherited one is refused
        run_kinesis(
            records=messages,
            consumers=consumers,
            rates=rates,
            shards=shards,
            workers=workers,
            seed=seed,
            work_ms=work_ms,
            pause=pause,
            timeout=timeout,
            markdown=markdown,
            lock_off=lock_off,
        )
        return
    console = stdout()
    settings = ChaosSettings(
        messages=messages or 10_000,
        rates=rates,
        seed=seed,
        workers=workers or 6,
        work_ms=work_ms,
        pause_s=pause,
        drain_timeout_s=timeout,
        store=store,
        lock_off=lock_off,
        workload=workload,
    )
    steps_page_elsewhere = markdown is not None and (
        markdown.name != "chaos-steps.md" or store is not StoreKind.DYNAMODB
    )
    if workload is Workload.STEPS and steps_page_elsewhere:
        raise typer.BadParameter(
            "the three-step run's page is docs/chaos-steps.md, from a DynamoDB run",
            param_hint="--markdown",
        )
    if store is StoreKind.POSTGRES and markdown is not None and markdown.name == "chaos.md":
        raise typer.BadParameter(
            "docs/chaos.md is the DynamoDB run's page; write this one to docs/chaos-postgres.md",
            param_hint="--markdown",
        )
    names = consumers if consumers is not None else defaults(store, workload)
    try:
        kinds = by_names(
            [name.strip() for name in names.split(",") if name.strip()], store, workload
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--consumers") from exc
    apply_lock_off(lock_off)  # the workers inherit it; an inherited one is refused
    result = run_chaos(settings, kinds, console)
    if workload is Workload.STEPS:
        from fault_injection import steps_page, steps_report

        steps_report.print_report(console, settings, result.plan, result.runs)
        if markdown is not None:
            steps_page.write_page(markdown, result, steps_page.make_command(sys.argv[1:]))
            console.print(f"wrote {markdown}")
    else:
        print_report(console, settings, result.plan, result.runs)
        if markdown is not None:
            write_page(markdown, result, "eonce " + " ".join(sys.argv[1:]))
            console.print(f"wrote {markdown}")
    layer = result.run(GATE[workload])
    if layer is not None and not (layer.verdict.ok and layer.drained):
        raise typer.Exit(1)
