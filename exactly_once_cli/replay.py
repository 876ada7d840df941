"""`replay`: move dead-lettered messages back to their queue (SQS-native task, or copy mode)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from difflib import get_close_matches
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from botocore.exceptions import BotoCoreError, ClientError
from rich.table import Table
from rich.text import Text
from typer import _click  # typer 0.29 vendors click; its context and command types live here

from exactly_once_cdk.outputs import LOCAL_DYNAMODB_ENDPOINT, TOPIC_ARN
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
from exactly_once_cli.invoke import DEFAULT_HANDLER, point_clients_at, source_folder
from exactly_once_ops.handlers import load_handler, with_layers
from exactly_once_ops.lambda_context import LocalLambdaContext
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
    DlqRunReport,
    MessageFilter,
    queue_depth,
)
from exactly_once_ops.stack_template import subscribed_topics
from exactly_once_ops.subscriber_replay import (
    LAMBDA_DLQ,
    ON_FAILURE,
    PERMANENT,
    SNS_REDRIVE,
    Invocation,
    Invoker,
    LambdaInvoker,
    LocalInvoker,
    NoSuchSubscriber,
    SubscriberOptions,
    SubscriberReplay,
    SubscriberReport,
    SubscriberTarget,
    find_subscription,
    subscriber_target,
)
from exactly_once_ops.targets import (
    DEFAULT_STACK,
    AwsTarget,
    StackNotFound,
    is_fifo,
    queue_arn,
    replay_destination,
    resolve_queue_url,
    stack_outputs,
    topics_in,
)

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient

NEW_IDS_NOTE = (
    "Replayed messages get NEW SQS messageIds, so a consumer must be keyed on a business id "
    "(orderId, paymentId) to recognise a replay of something it already saw."
)

SUBSCRIBER_COMMAND = "subscriber"
IMPLICIT = "eonce.replay.implicit-subscriber"
"""Context meta: the subscriber was named in place of a command (`eonce replay NAME`)."""


class ReplayGroup(OneLineErrorGroup):
    """`eonce replay NAME`: a NAME that is none of replay's commands is a topic subscriber,
    replayed as `eonce replay subscriber NAME` would."""

    def resolve_command(
        self, ctx: _click.Context, args: list[str]
    ) -> tuple[str | None, _click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            ctx.meta[IMPLICIT] = True
            return SUBSCRIBER_COMMAND, self.commands[SUBSCRIBER_COMMAND], args
        return super().resolve_command(ctx, args)


replay_app = typer.Typer(
    cls=ReplayGroup,
    no_args_is_help=True,
    help="Move messages from a dead-letter queue back to their source queue, or replay a topic "
    "subscriber's dead-letter queue into its function.\n\n"
    "`native` starts an SQS message-move task (server-side, fast, no filtering); `copy` receives, "
    "filters, re-sends and deletes (preview, backup, keep). " + NEW_IDS_NOTE + "\n\n"
    "`eonce replay SUBSCRIBER` (or `replay subscriber SUBSCRIBER`) rebuilds the SNS event of each "
    "message in a direct subscriber's DLQ and invokes its function with it.",
)

DlqUrl = Annotated[str | None, typer.Option(help="Dead-letter queue URL (else from the stack).")]
QueueUrl = Annotated[
    str | None, typer.Option(help="Destination queue URL (default: the DLQ's source queue).")
]
Consumer = Annotated[
    str | None,
    typer.Option(help="A consumer of the stack (see `eonce consumers`)."),
]
Limit = Annotated[int | None, typer.Option(help="Replay at most this many.", min=1)]
Visibility = Annotated[
    int, typer.Option(help="Seconds a received message stays hidden during the run.", min=1)
]
Rate = Annotated[float | None, typer.Option(help="At most this many messages/s.")]
WaitSeconds = Annotated[
    int,
    typer.Option(
        help="Long-poll wait per receive (0-20). The DLQ counts as exhausted after one "
        "empty receive, or three in a row with 0 (a short poll samples only some servers).",
        min=0,
        max=20,
    ),
]


def _dry_run(what: str) -> Any:
    return typer.Option("--dry-run", "--peek", help=f"Show what would {what}; change nothing.")


def _positive_rate(rate: float | None) -> None:
    if rate is not None and rate <= 0:
        raise CliError("--rate must be positive")


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
DRY_RUN_NOTE = " (dry run: nothing changed)"


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
        columns = ("messageId", "group", "eo-error-type", "eo-error-message", "attributes", "body")
        for column in columns:
            table.add_column(column, overflow="fold")
        for item in report.previews:
            cells = (
                item["messageId"],
                item["groupId"] or "",
                item["errorType"] or "",
                item["errorMessage"] or "",
                ", ".join(item["attributes"]),
                item["body"][:120],
            )
            table.add_row(*map(Text, cells))  # the message's text, never rich markup
        out.print(table)
    summary = Table(title="replay copy" + (DRY_RUN_NOTE if options.dry_run else ""))
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
    _summary(summary, row, report)
    warnings = _cut_short(report, options)
    for line in warnings:
        out.print(f"warning: {line}", markup=False)
    _notes(report, options.limit)
    return bool(warnings)


def _summary(table: Table, row: dict[str, int | None], report: DlqRunReport) -> None:
    """The counts as a one-row table (the DLQ's depth last), then each failure on a line."""
    out = stdout()
    row["left in DLQ"] = report.left_in_dlq
    for column in row:
        table.add_column(column)
    table.add_row(*("?" if value is None else str(value) for value in row.values()))
    out.print(table)
    for failure in report.failures:
        out.print(
            f"failed {failure.stage} {failure.message_id}: {failure.code}: {failure.message}",
            markup=False,
        )


def _notes(report: DlqRunReport, limit: int | None) -> None:
    out = stdout()
    if report.limit_reached:
        out.print(f"--limit {limit} reached", markup=False)
    if report.release_failures:
        out.print(
            f"{report.release_failures} held message(s) could not be made visible again; "
            "they reappear when their visibility timeout ends",
            markup=False,
        )


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
    dry_run: Annotated[bool, _dry_run("move (all stay in the DLQ)")] = False,
    limit: Limit = None,
    rate: Rate = None,
    keep: Annotated[bool, typer.Option(help="Copy without deleting from the DLQ.")] = False,
    backup: Annotated[
        Path | None,
        typer.Option(
            help="Append one JSON line per moved message to this file (opened before anything "
            "moves; each line is written before its message leaves the DLQ).",
            dir_okay=False,
        ),
    ] = None,
    visibility_timeout: Visibility = 60,
    wait_seconds: WaitSeconds = 2,
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
    _positive_rate(rate)
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


R = TypeVar("R", bound=DlqRunReport)


def _with_bar(
    run: Callable[[Callable[[R], None]], R],
    *,
    total: int | None,
    counts: Callable[[R], str],
    so_far: Callable[[], str],
    changed: Callable[[], bool],
) -> R:
    """Run a replay with a progress bar (`counts` describes it); an error after something
    changed, or Ctrl-C, says how far it got (`so_far`) in one line."""
    try:  # outside the bar, so that the last line printed is the outcome
        with progress_bar("{task.description}") as bar:
            task = bar.add_task("replaying", total=total)

            def show(report: R) -> None:
                # The DLQ's depth at the start is an estimate: arrivals raise the total.
                grown = None if total is None else max(total, report.examined)
                bar.update(task, completed=report.examined, total=grown, description=counts(report))

            return run(show)
    except KeyboardInterrupt:
        stderr().print(f"interrupted: {so_far()}", markup=False)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except (ClientError, BotoCoreError, OSError) as exc:
        if not changed():
            raise  # nothing changed: the usual one-line error
        message, _ = describe(exc)
        fail(f"{message}; so far {so_far()}")


def _run_copy(replay: CopyReplay, *, total: int | None) -> CopyReport:
    options = replay.options

    def counts(report: CopyReport) -> str:
        if options.dry_run:
            return f"{_verb(options)} {len(report.previews)}, not matching {report.skipped}"
        return (
            f"{_verb(options)} {len(report.moved)}, skipped {report.skipped}, "
            f"failed {len(report.failures)}"
        )

    return _with_bar(
        replay.run,
        total=total,
        counts=counts,
        so_far=lambda: _so_far(replay.report, options),
        changed=lambda: bool(replay.report.moved),
    )


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


class RunVia(StrEnum):
    AUTO = "auto"
    LAMBDA = "lambda"
    LOCAL = "local"


class Shape(StrEnum):
    PERMANENT = PERMANENT
    ON_FAILURE = ON_FAILURE
    LAMBDA_DLQ = LAMBDA_DLQ
    SNS_REDRIVE = SNS_REDRIVE


@replay_app.command(
    SUBSCRIBER_COMMAND,
    short_help="Replay a topic subscriber's DLQ into its function (`eonce replay SUBSCRIBER`).",
    help="Rebuild the SNS event of each message in a direct topic subscriber's dead-letter "
    "queue and invoke the function with it; a message leaves the DLQ only once its invocation "
    "was accepted. Shapes: `permanent` (the handler's own, with eo-* attributes: the event "
    "carries eo-replay-nonce, so a permanent failure whose cause was fixed runs once more), "
    "`on-failure` (Lambda's record after its retries: its requestPayload), `lambda-dlq` (the "
    "event itself) and `sns-redrive` (what SNS could not deliver: the envelope). Against AWS: "
    "lambda.invoke with InvocationType Event, as SNS does (--wait: RequestResponse). Against "
    "the local stack (its stack has a LocalDynamoDbEndpoint output): the subscriber's code in "
    "this process, as `eonce invoke` runs it. Exit code 1 if any message failed or could not "
    "be rebuilt.",
)
def subscriber_cmd(
    ctx: typer.Context,
    subscriber: Annotated[
        str,
        typer.Argument(help="The subscriber as the stack names it, any case: salescounter."),
    ],
    stack: StackOption = DEFAULT_STACK,
    dry_run: Annotated[bool, _dry_run("be replayed, with each shape and reason")] = False,
    limit: Limit = None,
    rate: Rate = None,
    shape: Annotated[
        list[Shape] | None, typer.Option(help="Only messages of this shape (repeatable).")
    ] = None,
    run: Annotated[
        RunVia,
        typer.Option(
            help="lambda: invoke the deployed function; local: its code in this process; auto: "
            "local for a stack deployed into the local emulator, else lambda."
        ),
    ] = RunVia.AUTO,
    wait: Annotated[
        bool,
        typer.Option(
            help="Lambda: invoke with RequestResponse and keep a message whose invocation "
            "fails (default: Event, as SNS invokes; Lambda's retries and on-failure "
            "destination then apply)."
        ),
    ] = False,
    topic_arn: Annotated[
        str | None,
        typer.Option(
            help="The topic the `permanent` messages came from (default: the topic the "
            "function is subscribed to, by SNS or the stack's template, else the stack's only "
            "topic)."
        ),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option(help="local: the function's code folder (default: as `eonce invoke`)."),
    ] = None,
    handler: Annotated[
        str | None, typer.Option(help="local: module.function (default: the deployed one).")
    ] = None,
    visibility_timeout: Visibility = 300,
    wait_seconds: WaitSeconds = 2,
) -> None:
    """Subscriber replay (see the help above)."""
    target = aws_target(ctx)
    _positive_rate(rate)
    found, outputs = _find_subscriber(ctx, target, subscriber, stack)
    functions: LambdaClient = target.client("lambda")
    config = dict(functions.get_function_configuration(FunctionName=found.function_name))
    subscription = find_subscription(
        target.client("sns"),
        str(config.get("FunctionArn", found.function_name)),
        subscribed_topics(target.cloudformation(), stack, found.function_name)
        or [outputs[f"{topic}{TOPIC_ARN}"] for topic in topics_in(outputs)],
        topic_arn,
    )
    options = SubscriberOptions(
        limit=limit,
        dry_run=dry_run,
        shapes=tuple(str(s) for s in shape or ()),
        rate=rate,
        visibility_timeout=visibility_timeout,
        wait_seconds=wait_seconds,
    )
    invoker: Invoker | None = None  # a dry run invokes nothing
    if not dry_run and (
        run is RunVia.LOCAL or (run is RunVia.AUTO and LOCAL_DYNAMODB_ENDPOINT in outputs)
    ):
        invoker = _local_invoker(target, outputs, stack, found.name, config, source, handler)
    elif not dry_run:
        invoker = LambdaInvoker(functions, found.function_name, wait=wait)
        how = "RequestResponse" if wait else "Event"
        stderr().print(f"invoking {found.function_name} (InvocationType {how})", markup=False)
    sqs = target.sqs()
    replay = SubscriberReplay(
        sqs, found.dlq_url, invoker, subscription=subscription, options=options
    )

    def counts(report: SubscriberReport) -> str:
        if dry_run:
            return f"would replay {len(report.candidates)}"
        return f"replayed {len(report.replayed)}, failed {len(report.failures)}"

    report = _with_bar(
        replay.run,
        total=queue_depth(sqs, found.dlq_url),
        counts=counts,
        so_far=lambda: (
            f"replayed {len(replay.report.replayed)} message(s) "
            f"({replay.report.deleted} deleted from the DLQ)"
        ),
        changed=lambda: bool(replay.report.replayed),
    )
    _subscriber_summary(found.name, report, options)
    if not dry_run and (report.failures or report.unreplayable):
        raise typer.Exit(1)


def _find_subscriber(
    ctx: typer.Context, target: AwsTarget, name: str, stack: str
) -> tuple[SubscriberTarget, dict[str, str]]:
    """The subscriber and the stack's outputs. Named in place of a command (`eonce replay
    NAME`), a name that is neither says both, with the command it may be a typo of."""
    implicit = bool(ctx.meta.get(IMPLICIT))
    commands = [info.name or "" for info in replay_app.registered_commands]
    close = get_close_matches(name, commands, n=1)
    hint = f"; did you mean `eonce replay {close[0]}`?" if implicit and close else ""
    neither = f"No such command {name!r} ({', '.join(commands)}), and "
    try:
        outputs = stack_outputs(target.cloudformation(), stack)
    except (StackNotFound, ClientError, BotoCoreError) as exc:
        if not implicit:
            raise
        message, code = describe(exc)
        fail(f"{neither}no topic subscriber could be looked up: {message}{hint}", code)
    try:
        return subscriber_target(outputs, name, stack), outputs
    except NoSuchSubscriber as exc:
        raise CliError(f"{neither if implicit else ''}{exc}{hint}") from exc


def _local_invoker(
    target: AwsTarget,
    outputs: dict[str, str],
    stack: str,
    name: str,
    config: dict[str, Any],
    source: Path | None,
    handler: str | None,
) -> LocalInvoker:
    """The subscriber's code in this process, with the deployed function's environment and
    the stack's DynamoDB endpoint (moto cannot run a function)."""
    os.environ.update(config.get("Environment", {}).get("Variables", {}))
    dynamodb = target.endpoint("dynamodb", outputs)
    point_clients_at(target, dynamodb)
    code = source_folder(name, source, target, stack)
    os.environ.update(with_layers({}, code.layers))
    folder = code.folder
    try:
        function = load_handler(
            str(folder), handler or config.get("Handler") or code.handler or DEFAULT_HANDLER
        )
    except (ImportError, AttributeError, SyntaxError) as exc:
        raise CliError(f"cannot load the handler from {folder}: {exc}") from exc
    stderr().print(
        f"running {name}'s code from {folder} in this process (region {target.region_name}; "
        f"DynamoDB at {dynamodb})",
        markup=False,
    )
    function_name = str(config.get("FunctionName", name))
    timeout = float(config.get("Timeout") or 30)
    return LocalInvoker(
        function,
        lambda: LocalLambdaContext(function_name, timeout_s=timeout, region=target.region_name),
    )


def _subscriber_summary(name: str, report: SubscriberReport, options: SubscriberOptions) -> None:
    """What was (or would be) replayed, each with its shape and reason or result; the counts."""
    out = stdout()
    if options.dry_run:
        table = Table(title=f"would replay {len(report.candidates)} message(s)")
        rows = [(c.message_id, c.shape, c.sns_message_ids, c.reason) for c in report.candidates]
        last = "reason"
    else:
        table = Table(title=f"replayed {len(report.replayed)} message(s)")
        rows = [
            (r.message_id, r.shape, r.sns_message_ids, _result(r.invocation))
            for r in report.replayed
            if r.invocation is not None
        ]
        last = "result"
    for column in ("messageId", "shape", "SNS MessageId", last):
        table.add_column(column, overflow="fold")
    for message_id, kind, sns_ids, text in rows:  # the function's own text, never markup
        table.add_row(*map(Text, (message_id, kind, ", ".join(sns_ids), text)))
    out.print(table)
    for c in report.unreplayable:
        why = f" ({c.reason})" if c.reason else ""
        out.print(f"not replayable {c.message_id} [{c.shape}]{why}: {c.problem}", markup=False)
    row: dict[str, int | None]
    if options.dry_run:
        would = len(report.candidates)
        row = {"would replay": would, "would delete from DLQ": would}
    else:
        row = {
            "replayed": len(report.replayed),
            "deleted from DLQ": report.deleted,
            "failed": len(report.failures),
        }
    row["not replayable"] = len(report.unreplayable)
    if options.shapes:
        row["other shapes"] = report.skipped
    if report.returned:
        row["came back failed"] = report.returned
    title = f"replay subscriber {name}" + (DRY_RUN_NOTE if options.dry_run else "")
    _summary(Table(title=title), row, report)
    _notes(report, options.limit)


def _result(invocation: Invocation) -> str:
    """An accepted invocation: how (Queued, Returned), each record's outcome, any detail."""
    text = invocation.code
    if invocation.outcomes:
        text += f" ({', '.join(invocation.outcomes)})"
    return f"{text}: {invocation.detail}" if invocation.detail else text
