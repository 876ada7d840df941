"""Native replay: SQS's own message-move tasks (StartMessageMoveTask and friends).

SQS moves the messages server-side, which is fast and needs no client running, but it cannot
filter, preview or back up; `exactly_once_ops.replay` does that by copying. Emulators may lack
these APIs (moto answers with an HTML 500 page, or raises NotImplementedError in-process);
every call here turns that into `MoveTasksUnsupported` so the CLI can say so in one line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import (
        ListMessageMoveTasksResultEntryTypeDef,
        StartMessageMoveTaskRequestTypeDef,
    )

TERMINAL_STATUSES = frozenset({"COMPLETED", "CANCELLED", "FAILED"})
CLOCK_SLACK_MS = 60_000
"""How far SQS's clock may be behind ours when matching a finished task to the one we started."""
UNSUPPORTED_CODES = frozenset(
    {"InvalidAction", "UnknownOperationException", "UnsupportedOperation", "NotImplemented"}
)
"""Error codes that mean the endpoint does not know the action at all."""


class MoveTasksUnsupported(Exception):
    """The endpoint has no message-move API (e.g. the local stack's moto)."""

    def __init__(self, operation: str) -> None:
        super().__init__(f"the endpoint does not support {operation}")
        self.operation = operation


def is_unsupported(exc: ClientError) -> bool:
    """Whether an error says the action does not exist here, rather than that it failed.

    Real SQS answers unknown actions with InvalidAction; LocalStack with 501; moto's server
    with an HTML 500 page (botocore then reports the status as the code). An HTML body is
    never an SQS answer, but a proxy's 502/503 page is an outage, so only 500 and 501 count.
    """
    error = exc.response.get("Error", {})
    meta = exc.response.get("ResponseMetadata", {})
    status = meta.get("HTTPStatusCode")
    content_type = meta.get("HTTPHeaders", {}).get("content-type", "")
    html = content_type.startswith("text/html") or error.get("Message", "").lstrip().startswith("<")
    return error.get("Code") in UNSUPPORTED_CODES or status == 501 or (status == 500 and html)


@contextmanager
def _move_api(operation: str) -> Iterator[None]:
    try:
        yield
    except NotImplementedError as exc:  # moto in-process (mock_aws)
        raise MoveTasksUnsupported(operation) from exc
    except ClientError as exc:
        if is_unsupported(exc):
            raise MoveTasksUnsupported(operation) from exc
        raise


@dataclass(frozen=True)
class MoveTask:
    """One message-move task as ListMessageMoveTasks reports it."""

    status: str
    source_arn: str
    handle: str | None = None
    """Only reported while the task is RUNNING."""
    destination_arn: str | None = None
    rate: int | None = None
    moved: int = 0
    to_move: int | None = None
    failure_reason: str | None = None
    started_ms: int | None = None

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES


def _task(entry: ListMessageMoveTasksResultEntryTypeDef) -> MoveTask:
    return MoveTask(
        status=entry.get("Status", "UNKNOWN"),
        source_arn=entry.get("SourceArn", ""),
        handle=entry.get("TaskHandle"),
        destination_arn=entry.get("DestinationArn"),
        rate=entry.get("MaxNumberOfMessagesPerSecond"),
        moved=entry.get("ApproximateNumberOfMessagesMoved", 0),
        to_move=entry.get("ApproximateNumberOfMessagesToMove"),
        failure_reason=entry.get("FailureReason"),
        started_ms=entry.get("StartedTimestamp"),
    )


def start_move(
    sqs: SQSClient,
    source_arn: str,
    *,
    destination_arn: str | None = None,
    rate: int | None = None,
) -> str:
    """Start moving the DLQ's messages; no destination means back to their original queues."""
    if rate is not None and not 1 <= rate <= 500:
        raise ValueError("--rate must be between 1 and 500 messages per second")
    request: StartMessageMoveTaskRequestTypeDef = {"SourceArn": source_arn}
    if destination_arn is not None:
        request["DestinationArn"] = destination_arn
    if rate is not None:
        request["MaxNumberOfMessagesPerSecond"] = rate
    with _move_api("StartMessageMoveTask"):
        response = sqs.start_message_move_task(**request)
    return response["TaskHandle"]


def list_moves(sqs: SQSClient, source_arn: str) -> list[MoveTask]:
    """The most recent tasks (up to 10) for a DLQ, as SQS returns them."""
    with _move_api("ListMessageMoveTasks"):
        response = sqs.list_message_move_tasks(SourceArn=source_arn, MaxResults=10)
    return [_task(entry) for entry in response.get("Results", [])]


def cancel_move(sqs: SQSClient, handle: str) -> int:
    """Cancel a running task; returns how many messages it had moved."""
    with _move_api("CancelMessageMoveTask"):
        response = sqs.cancel_message_move_task(TaskHandle=handle)
    return response["ApproximateNumberOfMessagesMoved"]


def find_task(tasks: list[MoveTask], handle: str, started_after_ms: int) -> MoveTask | None:
    """Our task among a DLQ's tasks.

    While RUNNING it carries our handle. Once finished SQS drops the handle, but a queue runs
    one task at a time, so the latest task started since we started it is ours.
    """
    for task in tasks:
        if task.handle == handle:
            return task
    finished = [
        task
        for task in tasks
        if task.finished
        and task.started_ms is not None
        and task.started_ms >= started_after_ms - CLOCK_SLACK_MS
    ]
    return max(finished, key=lambda task: task.started_ms or 0) if finished else None


def wait_for_move(
    sqs: SQSClient,
    source_arn: str,
    handle: str,
    *,
    started_after_ms: int,
    poll_interval_s: float = 2.0,
    timeout_s: float | None = None,
    on_update: Callable[[MoveTask], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> MoveTask:
    """Poll ListMessageMoveTasks until our task finishes; raises TimeoutError past `timeout_s`."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        task = find_task(list_moves(sqs, source_arn), handle, started_after_ms)
        if task is not None:
            if on_update is not None:
                on_update(task)
            if task.finished:
                return task
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"move task still not finished after {timeout_s:.0f}s: {handle}")
        sleep(poll_interval_s)
