"""`send`: put messages on a consumer's queue (inline, file, JSONL or generated, duplicates)."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from exactly_once_cli.common import CliError, StackOption, aws_target, stderr, stdout
from exactly_once_ops.message_attributes import parse_attributes
from exactly_once_ops.send import SendReport, send_messages
from exactly_once_ops.targets import DEFAULT_STACK, content_based_dedup, is_fifo, resolve_queue_url
from exactly_once_ops.workload import (
    DEFAULT_GROUP_FIELDS,
    DEFAULT_TEMPLATES,
    build_messages,
    duplicate_count,
    generate_bodies,
    read_jsonl,
    with_duplicates,
)

MAX_FAILURES_SHOWN = 50


def default_template(consumer: str | None) -> str:
    """The sample consumers' body shapes; any other consumer's bodies need --template."""
    if consumer is None:
        return DEFAULT_TEMPLATES["orders"]
    found = DEFAULT_TEMPLATES.get(consumer.lower())
    if found is None:
        raise CliError(
            f"--count for consumer {consumer!r} needs --template (its body shape, e.g. "
            f'\'{{"id": "{{id}}"}}\'); built-in templates: {", ".join(DEFAULT_TEMPLATES)}'
        )
    return found


def collect_bodies(
    *,
    body: list[str],
    file: Path | None,
    jsonl: Path | None,
    template: str | None,
    count: int | None,
    consumer: str | None,
    key_prefix: str | None,
    groups: int,
    duplicates: float,
    rng: random.Random,
) -> list[str]:
    """The bodies to send, from exactly one source, with the requested share of duplicates."""
    given = sum((bool(body), file is not None, jsonl is not None))
    generated = template is not None or count is not None
    if given + generated != 1:
        raise CliError("give exactly one of --body, --file, --jsonl or --count/--template")
    if generated:
        prefix = key_prefix if key_prefix is not None else f"{uuid.uuid4().hex[:8]}-"
        chosen = template or default_template(consumer)
        return generate_bodies(
            chosen,
            count if count is not None else 1,
            key_prefix=prefix,
            groups=groups,
            duplicates=duplicates,
            rng=rng,
        )
    if file is not None:
        bodies = [file.read_text(encoding="utf-8").rstrip("\n")]
    elif jsonl is not None:
        bodies = read_jsonl(jsonl)
        if not bodies:
            raise CliError(f"{jsonl}: no bodies in file")
    else:
        bodies = list(body)
    return with_duplicates(bodies, duplicate_count(len(bodies), duplicates), rng)


def print_report(report: SendReport, total: int) -> None:
    """Summary table, then failed entries one per line (entry id = index of the message)."""
    out = stdout()
    table = Table(title="send", show_header=False)
    table.add_row("messages", str(total))
    table.add_row("sent", f"[green]{report.sent}[/]")
    table.add_row("failed", f"[red]{len(report.failed)}[/]" if report.failed else "0")
    table.add_row("elapsed", f"{report.elapsed_s:.2f} s")
    table.add_row("throughput", f"{report.throughput:.1f} msg/s")
    out.print(table)
    for failure in report.failed[:MAX_FAILURES_SHOWN]:
        out.print(f"failed entry {failure.id}: {failure.code}: {failure.message}", markup=False)
    if len(report.failed) > MAX_FAILURES_SHOWN:
        out.print(f"... and {len(report.failed) - MAX_FAILURES_SHOWN} more failed entries")


def send_cmd(
    ctx: typer.Context,
    queue_url: Annotated[str | None, typer.Option(help="Queue URL (else from the stack).")] = None,
    consumer: Annotated[
        str | None,
        typer.Option(help="A consumer of the stack (see `eonce consumers`)."),
    ] = None,
    stack: StackOption = DEFAULT_STACK,
    body: Annotated[
        list[str] | None, typer.Option(help="A message body (repeat for several).")
    ] = None,
    file: Annotated[
        Path | None, typer.Option(help="Send the file's content as one body.", dir_okay=False)
    ] = None,
    jsonl: Annotated[
        Path | None, typer.Option(help="Send one body per line of a JSONL file.", dir_okay=False)
    ] = None,
    count: Annotated[
        int | None, typer.Option(help="Generate this many bodies from --template.", min=1)
    ] = None,
    template: Annotated[
        str | None,
        typer.Option(
            help="Body template: {id} = key prefix + index (the business id), {index}, "
            "{group} = index modulo --groups. Default depends on --consumer."
        ),
    ] = None,
    key_prefix: Annotated[
        str | None, typer.Option(help="Prefix of generated ids (default: random per run).")
    ] = None,
    groups: Annotated[int, typer.Option(help="Distinct {group} values.", min=1)] = 1,
    duplicates: Annotated[
        float,
        typer.Option(help="Share of messages that re-send an earlier body (same business id)."),
    ] = 0.0,
    seed: Annotated[int | None, typer.Option(help="Seed for where duplicates go.")] = None,
    attribute: Annotated[
        list[str] | None,
        typer.Option(help="Message attribute Name=Value, Name:Number=5 or Name:Binary=<b64>."),
    ] = None,
    group_id: Annotated[str | None, typer.Option(help="FIFO MessageGroupId for all.")] = None,
    group_field: Annotated[
        str | None,
        typer.Option(
            help="FIFO: take MessageGroupId from this body field (default with --consumer "
            "payments and the default template: accountId)."
        ),
    ] = None,
    dedup_id: Annotated[
        str | None,
        typer.Option(
            help="FIFO MessageDeduplicationId ({index} = message index). Default: the queue's "
            "content-based dedup, else a fresh id per message."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Parallel SendMessageBatch calls.", min=1)] = 4,
) -> None:
    """Send messages to a queue with SendMessageBatch (10 per call) and report each failure.

    Exits 1 if any message was not accepted.
    """
    target = aws_target(ctx)
    rng = random.Random(seed)
    try:
        bodies = collect_bodies(
            body=body or [],
            file=file,
            jsonl=jsonl,
            template=template,
            count=count,
            consumer=consumer,
            key_prefix=key_prefix,
            groups=groups,
            duplicates=duplicates,
            rng=rng,
        )
        attributes = parse_attributes(attribute or [])
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    if template is None and count is not None and not (group_id or group_field):
        group_field = DEFAULT_GROUP_FIELDS.get((consumer or "").lower())
    url = resolve_queue_url(target, queue_url=queue_url, consumer=consumer, stack=stack)
    sqs = target.sqs()
    fifo = is_fifo(url)
    # Also proves the queue exists before any batch is sent.
    content_based = content_based_dedup(sqs, url)
    try:
        messages = build_messages(
            bodies,
            attributes=attributes,
            fifo=fifo,
            content_based_dedup=content_based,
            run_id=uuid.uuid4().hex,
            group_id=group_id,
            group_field=group_field,
            dedup_id=dedup_id,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    with Progress(
        TextColumn("sending"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr(),
    ) as progress:
        task = progress.add_task("send", total=len(messages))
        report = send_messages(
            sqs,
            url,
            messages,
            concurrency=concurrency,
            on_batch=lambda n: progress.advance(task, n),
        )
    print_report(report, len(messages))
    if report.failed:
        raise typer.Exit(1)
