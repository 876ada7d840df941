"""`replay`: move dead-lettered messages back to their queue (SQS-native task, or copy mode)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.table import Table

from exactly_once_cli.common import (
    FAILURE_EXIT,
    CliError,
    OneLineErrorGroup,
    StackOption,
    aws_target,
    describe,
    fail,
    name_values,
    progress_bar,
    stderr,
    stdout,
)
from exactly_once_ops.move_tasks import (
    MoveTask,
    MoveTasksUnsupported,
    cancel_move,
    list_moves,
    start_move,
    wait_for_move,
)
from exactly_once_ops.replay import (
    MAX_BATCH,
    BackupFile,
    CopyOptions,
    CopyReplay,
    CopyReport,
    MessageFilter,
    queue_depth,
)
from exactly_once_ops.targets import (
    DEFAULT_STACK,
    AwsTarget,
    is_fifo,
    queue_arn,
    replay_destination,
    resolve_queue_url,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

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


INTERRUPTED_EXIT = 130
"""What a shell reports for a process ended by Ctrl-C (128 + SIGINT)."""


def _verb(options: CopyOptions) -> str:
    """What happens to a matching message; a dry run words it as hypothetical."""
    if options.dry_run:
        return "would copy" if options.keep else "would move"
    return "copied" if options.keep else "moved"


def _so_far(report: CopyReport, options: CopyOptions) -> str:
    """The counts after a run that stopped early (an error or Ctrl-C), for one line."""
    left = "?" if report.left_in_dlq is None else str(report.left_in_dlq)
    deleted = "" if options.keep else f" ({report.deleted} deleted from the DLQ)"
    return f"{_verb(options)} {len(report.moved)} message(s){deleted}, {left} left in the DLQ"


def _copy_summary(report: CopyReport, options: CopyOptions) -> bool:
    """Print the outcome; True when matching messages may remain that a rerun won't reach."""
    out = stdout()
    if options.dry_run:
        table = Table(title=f"{_verb(options)} {len(report.previews)} message(s)")
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
    row: dict[str, int | None]
    if options.dry_run:
        would_delete = 0 if options.keep else len(report.previews)
        row = {
            _verb(options): len(report.previews),
            "would delete from DLQ": would_delete,
            "not matching": report.skipped,
        }
    else:
        row = {
            _verb(options): len(report.moved),
            "deleted from DLQ": report.deleted,
            "skipped by filter": report.skipped,
            "failed": len(report.failures),
        }
    if report.held_back:
        row["held back (FIFO)"] = report.held_back
    if report.returned:  # replayed, failed again, dead-lettered again: not this run's to retry
        row["came back failed"] = report.returned
    row["left in DLQ"] = report.left_in_dlq
    for column in row:
        summary.add_column(column)
    summary.add_row(*("?" if value is None else str(value) for value in row.values()))
    out.print(summary)
    for failure in report.failures:
        out.print(
            f"failed {failure.stage} {failure.message_id}: {failure.code}: {failure.message}",
            markup=False,
        )
    warnings = _cut_short(report, options)
    for line in warnings:
        out.print(f"warning: {line}", markup=False)
    if report.limit_reached:
        out.print(f"--limit {options.limit} reached", markup=False)
    if report.release_failures:
        out.print(
            f"{report.release_failures} held message(s) could not be made visible again; "
            "they reappear when their visibility timeout ends",
            markup=False,
        )
    return bool(warnings)


def _groups(groups: list[str]) -> str:
    shown = ", ".join(groups[:5])
    return shown + (f" and {len(groups) - 5} more" if len(groups) > 5 else "")


def _cut_short(report: CopyReport, options: CopyOptions) -> list[str]:
    """Why matching messages may be left that rerunning the same command won't reach."""
    lines = []
    hidden = report.hidden
    if hidden != 0:
        count = "some messages" if hidden is None else f"{hidden} message(s)"
        lines.append(f"{count} in the DLQ were never examined, and some may match")
        if report.blocked_groups:
            why, then = "not matching, or failed", "Replay or delete those, then run again"
            if options.dry_run:
                why, then = "a dry run deletes nothing", "A real run gets further"
            elif options.keep:
                why, then = "--keep deletes nothing", "Run without --keep to reach the rest"
            lines.append(
                f"FIFO group(s) {_groups(report.blocked_groups)} start with {MAX_BATCH} "
                f"messages that stay in the DLQ ({why}), and SQS returns no later message of "
                f"a group until those are deleted. {then}"
            )
    if report.stopped_groups:
        seen = f" ({report.held_back} matching seen and held back)" if report.held_back else ""
        lines.append(
            f"FIFO group(s) {_groups(report.stopped_groups)} stop at a message that failed to "
            f"send, so that nothing overtakes it; the rest of each group stays in the DLQ{seen}. "
            "Fix the failure and run again"
        )
    return lines


@replay_app.command(
    "copy",
    short_help="Receive, filter, re-send, then delete only what was confirmed sent.",
    help="Copy mode: receive from the DLQ, filter, re-send to the queue, delete only entries "
    "SendMessageBatch confirmed. Messages that don't match stay in the DLQ. Receives until the "
    "DLQ is exhausted or --limit is reached. Exit code 1 if a message failed, or if matching "
    "messages may be left that the run could not reach (a FIFO group whose first 10 messages "
    "stay in the DLQ hides the rest of it; the summary names the groups). " + NEW_IDS_NOTE,
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
        typer.Option(
            help="Append one JSON line per moved message to this file (opened before anything "
            "moves; each line is written before its message leaves the DLQ).",
            dir_okay=False,
        ),
    ] = None,
    visibility_timeout: Annotated[
        int, typer.Option(help="Seconds a received message stays hidden during the run.", min=1)
    ] = 60,
    wait_seconds: Annotated[
        int,
        typer.Option(
            help="Long-poll wait per receive (0-20). The DLQ counts as exhausted after one "
            "empty receive, or three in a row with 0 (a short poll samples only some servers).",
            min=0,
            max=20,
        ),
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
    )
    backup_file = _open_backup(backup) if backup is not None and not dry_run else None
    try:
        report = _run_copy(
            CopyReplay(
                sqs,
                queues.dlq,
                destination,
                message_filter=message_filter,
                options=options,
                fifo_destination=is_fifo(destination),
                backup=backup_file,
            ),
            total=_bar_total(sqs, queues.dlq, message_filter, limit),
        )
    finally:
        if backup_file is not None:
            backup_file.close()
    incomplete = _copy_summary(report, options)
    if report.failures or (incomplete and not dry_run):
        raise typer.Exit(1)


def _open_backup(path: Path) -> BackupFile:
    """Open the backup before the DLQ is touched, so a bad path costs nothing."""
    try:
        return BackupFile(path)
    except OSError as exc:
        raise CliError(f"--backup {path}: {exc.strerror or exc}") from exc


def _bar_total(
    sqs: SQSClient, dlq: str, message_filter: MessageFilter, limit: int | None
) -> int | None:
    """Messages the run will look at: the DLQ's depth, or --limit when every message matches."""
    depth = queue_depth(sqs, dlq)
    if limit is not None and message_filter.matches_all and (depth is None or limit < depth):
        return limit
    return depth


def _run_copy(replay: CopyReplay, *, total: int | None) -> CopyReport:
    """Run with a progress bar; an error after something moved, or Ctrl-C, says what moved."""
    options = replay.options
    try:  # outside the bar, so that the last line printed is the outcome
        with progress_bar("{task.description}") as bar:
            task = bar.add_task("replaying", total=total)

            def show(report: CopyReport) -> None:
                if options.dry_run:
                    counts = f"{len(report.previews)}, not matching {report.skipped}"
                else:
                    counts = f"{len(report.moved)}, skipped {report.skipped}, "
                    counts += f"failed {len(report.failures)}"
                description = f"{_verb(options)} {counts}"
                # The DLQ's depth at the start is an estimate: arrivals raise the total.
                grown = None if total is None else max(total, report.examined)
                bar.update(task, completed=report.examined, total=grown, description=description)

            replay.on_progress = show
            return replay.run()
    except KeyboardInterrupt:
        stderr().print(f"interrupted: {_so_far(replay.report, options)}", markup=False)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except (ClientError, BotoCoreError, OSError) as exc:
        if not replay.report.moved:
            raise  # nothing changed: the usual one-line error
        message, _ = describe(exc)
        fail(f"{message}; so far {_so_far(replay.report, options)}")


@contextmanager
def _move_tasks_supported(target: AwsTarget) -> Iterator[None]:
    """An endpoint without the message-move API (moto) gets one line pointing to copy mode."""
    try:
        yield
    except MoveTasksUnsupported as exc:
        endpoint = target.endpoint("sqs").url
        where = f"the endpoint {endpoint}" if endpoint else "SQS here"
        fail(
            f"{where} does not support message-move tasks ({exc.operation}); a local emulator "
            "such as the local stack's moto lacks them. Use `eonce replay copy` instead",
            FAILURE_EXIT,
        )


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
    with _move_tasks_supported(target):
        handle = start_move(sqs, source_arn, destination_arn=destination_arn, rate=rate)
    out = stdout()
    out.print(f"started move task: {handle}", markup=False)
    if not wait:
        return
    with progress_bar("moving") as progress, _move_tasks_supported(target):
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
    with _move_tasks_supported(target):
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
    target = aws_target(ctx)
    with _move_tasks_supported(target):
        moved = cancel_move(target.sqs(), task_handle)
    stdout().print(f"cancelled; {moved} message(s) had been moved", markup=False)
