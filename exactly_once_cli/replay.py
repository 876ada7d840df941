"""`replay`: move dead-lettered messages back to their queue (SQS-native task, or copy mode)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from exactly_once_cli.common import (
    CliError,
    OneLineErrorGroup,
    StackOption,
    aws_target,
    name_values,
    stderr,
    stdout,
)
from exactly_once_ops.move_tasks import MoveTask, cancel_move, list_moves, start_move, wait_for_move
from exactly_once_ops.replay import CopyOptions, CopyReplay, CopyReport, MessageFilter
from exactly_once_ops.targets import (
    DEFAULT_STACK,
    AwsTarget,
    is_fifo,
    queue_arn,
    replay_destination,
    resolve_queue_url,
)

NEW_IDS_NOTE = (
    "Replayed messages get NEW SQS messageIds, so a consumer must be keyed on a business id "
    "(orderId, paymentId) to recognise a replay of something it already saw."
)

replay_app = typer.Typer(
    cls=OneLineErrorGroup,
    no_args_is_help=True,
    help="Move messages from a dead-letter queue back to their source queue.\n\n"
    "`native` starts an SQS message-move task (server-side, fast, no filtering); `copy` receives, "
    "filters, re-sends and deletes (preview, backup, keep). " + NEW_IDS_NOTE,
)

DlqUrl = Annotated[str | None, typer.Option(help="Dead-letter queue URL (else from the stack).")]
QueueUrl = Annotated[
    str | None, typer.Option(help="Destination queue URL (default: the DLQ's source queue).")
]
Consumer = Annotated[
    str | None,
    typer.Option(help="A consumer of the stack (see `eonce consumers`)."),
]


@dataclass(frozen=True)
class Queues:
    dlq: str
    destination: str | None


def resolve(
    target: AwsTarget,
    *,
    dlq_url: str | None,
    queue_url: str | None,
    consumer: str | None,
    stack: str,
) -> Queues:
    """The DLQ, and the destination when named (directly or as the consumer's queue)."""
    dlq = resolve_queue_url(
        target, queue_url=dlq_url, consumer=consumer, stack=stack, dead_letter=True
    )
    destination = queue_url
    if destination is None and consumer is not None:
        destination = resolve_queue_url(target, queue_url=None, consumer=consumer, stack=stack)
    return Queues(dlq, destination)


def _copy_summary(report: CopyReport, options: CopyOptions) -> None:
    out = stdout()
    if options.dry_run:
        table = Table(title=f"would move {len(report.previews)} message(s)")
        for column in ("messageId", "group", "eo-error-type", "attributes", "body"):
            table.add_column(column, overflow="fold")
        for item in report.previews:
            table.add_row(
                item["messageId"],
                item["groupId"] or "",
                item["errorType"] or "",
                ", ".join(item["attributes"]),
                item["body"][:120],
            )
        out.print(table)
    title = "replay copy" + (" (dry run: nothing changed)" if options.dry_run else "")
    summary = Table(title=title)
    summary.add_column("moved" if not options.keep else "copied")
    summary.add_column("deleted from DLQ")
    summary.add_column("skipped by filter")
    summary.add_column("failed")
    summary.add_row(
        str(len(report.previews) if options.dry_run else len(report.moved)),
        str(report.deleted),
        str(report.skipped),
        str(len(report.failures)),
    )
    out.print(summary)
    for failure in report.failures:
        out.print(
            f"failed {failure.stage} {failure.message_id}: {failure.code}: {failure.message}",
            markup=False,
        )
    if report.release_failures:
        out.print(
            f"{report.release_failures} held message(s) could not be made visible again; "
            "they reappear when their visibility timeout ends",
            markup=False,
        )


@replay_app.command(
    "copy",
    short_help="Receive, filter, re-send, then delete only what was confirmed sent.",
    help="Copy mode: receive from the DLQ, filter, re-send to the queue, delete only entries "
    "SendMessageBatch confirmed. Messages that don't match stay in the DLQ. " + NEW_IDS_NOTE,
)
def copy_cmd(
    ctx: typer.Context,
    dlq_url: DlqUrl = None,
    queue_url: QueueUrl = None,
    consumer: Consumer = None,
    stack: StackOption = DEFAULT_STACK,
    match_body: Annotated[
        str | None, typer.Option(help="Only messages whose body contains this text.")
    ] = None,
    regex: Annotated[
        bool, typer.Option(help="Treat --match-body as a regular expression.")
    ] = False,
    match_attribute: Annotated[
        list[str] | None, typer.Option(help="Only messages with attribute Name=Value (repeat).")
    ] = None,
    error_type: Annotated[
        list[str] | None,
        typer.Option(help="Only messages the layer dead-lettered with this eo-error-type."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", "--peek", help="Show what would move; change nothing (all stay in DLQ)."
        ),
    ] = False,
    limit: Annotated[int | None, typer.Option(help="Move at most this many.", min=1)] = None,
    rate: Annotated[float | None, typer.Option(help="At most this many messages/s.")] = None,
    keep: Annotated[bool, typer.Option(help="Copy without deleting from the DLQ.")] = False,
    backup: Annotated[
        Path | None,
        typer.Option(help="Append one JSON line per moved message to this file.", dir_okay=False),
    ] = None,
    visibility_timeout: Annotated[
        int, typer.Option(help="Seconds a received message stays hidden during the run.", min=1)
    ] = 60,
    wait_seconds: Annotated[
        int, typer.Option(help="Long-poll wait per receive (0-20).", min=0, max=20)
    ] = 2,
    keep_dedup_id: Annotated[
        bool,
        typer.Option(
            help="FIFO: re-use the original dedup id verbatim (SQS drops the replay if the "
            "original was sent < 5 min ago). Default: an id derived from it."
        ),
    ] = False,
) -> None:
    """Copy mode (see the help above)."""
    target = aws_target(ctx)
    if rate is not None and rate <= 0:
        raise CliError("--rate must be positive")
    try:
        message_filter = MessageFilter(
            body=match_body,
            regex=regex,
            attributes=name_values(match_attribute or [], "--match-attribute"),
            error_types=tuple(error_type or ()),
        )
    except re.error as exc:
        raise CliError(f"--match-body: bad regular expression: {exc}") from exc
    queues = resolve(target, dlq_url=dlq_url, queue_url=queue_url, consumer=consumer, stack=stack)
    sqs = target.sqs()
    destination = queues.destination or replay_destination(sqs, queues.dlq)
    options = CopyOptions(
        limit=limit,
        rate=rate,
        keep=keep,
        dry_run=dry_run,
        visibility_timeout=visibility_timeout,
        wait_seconds=wait_seconds,
        keep_dedup_id=keep_dedup_id,
        backup=backup,
    )
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), console=stderr()) as bar:
        task = bar.add_task("replaying", total=None)

        def show(report: CopyReport) -> None:
            bar.update(
                task,
                description=f"moved {len(report.moved) + len(report.previews)}, "
                f"skipped {report.skipped}, failed {len(report.failures)}",
            )

        report = CopyReplay(
            sqs,
            queues.dlq,
            destination,
            message_filter=message_filter,
            options=options,
            fifo_destination=is_fifo(destination),
            on_progress=show,
        ).run()
    _copy_summary(report, options)
    if report.failures:
        raise typer.Exit(1)


@replay_app.command(
    "native",
    short_help="Start an SQS message-move task (StartMessageMoveTask).",
    help="Start an SQS message-move task (StartMessageMoveTask). " + NEW_IDS_NOTE,
)
def native_cmd(
    ctx: typer.Context,
    dlq_url: DlqUrl = None,
    queue_url: Annotated[
        str | None,
        typer.Option(
            help="Destination queue URL. Default: the consumer's queue with --consumer, else "
            "each message's original source queue."
        ),
    ] = None,
    consumer: Consumer = None,
    stack: StackOption = DEFAULT_STACK,
    rate: Annotated[
        int | None, typer.Option(help="MaxNumberOfMessagesPerSecond (1-500).", min=1, max=500)
    ] = None,
    wait: Annotated[bool, typer.Option(help="Show progress until the task finishes.")] = False,
    poll_interval: Annotated[float, typer.Option(help="Seconds between progress polls.")] = 2.0,
    timeout: Annotated[
        float | None, typer.Option(help="With --wait: give up waiting after this many seconds.")
    ] = None,
) -> None:
    """Native mode (see the help above)."""
    target = aws_target(ctx)
    queues = resolve(target, dlq_url=dlq_url, queue_url=queue_url, consumer=consumer, stack=stack)
    sqs = target.sqs()
    source_arn = queue_arn(sqs, queues.dlq)
    destination_arn = queue_arn(sqs, queues.destination) if queues.destination else None
    started_ms = int(time.time() * 1000)
    handle = start_move(sqs, source_arn, destination_arn=destination_arn, rate=rate)
    out = stdout()
    out.print(f"started move task: {handle}", markup=False)
    if not wait:
        return
    with Progress(
        TextColumn("moving"), BarColumn(), MofNCompleteColumn(), console=stderr()
    ) as progress:
        task_id = progress.add_task("move", total=None)

        def show(task: MoveTask) -> None:
            progress.update(task_id, completed=task.moved, total=task.to_move)

        try:
            final = wait_for_move(
                sqs,
                source_arn,
                handle,
                started_after_ms=started_ms,
                poll_interval_s=poll_interval,
                timeout_s=timeout,
                on_update=show,
            )
        except TimeoutError as exc:
            raise CliError(str(exc)) from exc
    out.print(f"move task {final.status}: {final.moved} message(s) moved", markup=False)
    if final.status != "COMPLETED":
        reason = f": {final.failure_reason}" if final.failure_reason else ""
        stderr().print(f"move task ended {final.status}{reason}", markup=False)
        raise typer.Exit(1)


@replay_app.command("list")
def list_cmd(
    ctx: typer.Context,
    dlq_url: DlqUrl = None,
    consumer: Consumer = None,
    stack: StackOption = DEFAULT_STACK,
) -> None:
    """List the DLQ's recent message-move tasks (ListMessageMoveTasks)."""
    target = aws_target(ctx)
    dlq = resolve_queue_url(
        target, queue_url=dlq_url, consumer=consumer, stack=stack, dead_letter=True
    )
    sqs = target.sqs()
    tasks = list_moves(sqs, queue_arn(sqs, dlq))
    table = Table(title=f"move tasks of {dlq}")
    for column in ("status", "moved", "to move", "rate", "destination", "handle", "failure"):
        table.add_column(column, overflow="fold")
    for task in tasks:
        table.add_row(
            task.status,
            str(task.moved),
            "" if task.to_move is None else str(task.to_move),
            "" if task.rate is None else str(task.rate),
            task.destination_arn or "(original source)",
            task.handle or "",
            task.failure_reason or "",
        )
    stdout().print(table)


@replay_app.command("cancel")
def cancel_cmd(
    ctx: typer.Context,
    task_handle: Annotated[str, typer.Argument(help="Handle printed by `replay native`.")],
) -> None:
    """Cancel a running message-move task (CancelMessageMoveTask)."""
    moved = cancel_move(aws_target(ctx).sqs(), task_handle)
    stdout().print(f"cancelled; {moved} message(s) had been moved", markup=False)
