"""`replay native|list|cancel`: message-move tasks via botocore's Stubber (moto lacks them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.stub import Stubber

from exactly_once_ops.move_tasks import MoveTask, find_task
from exactly_once_ops.targets import AwsTarget
from tests.cli.support import REGION, Invoke

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

DLQ_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-queue-dlq"
DLQ_ARN = "arn:aws:sqs:us-east-1:123456789012:orders-queue-dlq"
SOURCE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-queue"
SOURCE_ARN = "arn:aws:sqs:us-east-1:123456789012:orders-queue"
HANDLE = "eyJ0YXNrSWQiOiJ0ZXN0In0="


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    """The CLI's SQS client, stubbed; every queued response must be used."""
    client: SQSClient = boto3.client("sqs", region_name=REGION)
    stubber = Stubber(client)
    monkeypatch.setattr(AwsTarget, "sqs", lambda self: client)
    with stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def expect_arn(stub: Stubber, url: str, arn: str) -> None:
    stub.add_response(
        "get_queue_attributes",
        {"Attributes": {"QueueArn": arn}},
        {"QueueUrl": url, "AttributeNames": ["QueueArn"]},
    )


def expect_list(stub: Stubber, *results: dict[str, Any]) -> None:
    stub.add_response(
        "list_message_move_tasks",
        {"Results": list(results)},
        {"SourceArn": DLQ_ARN, "MaxResults": 10},
    )


def task(status: str, moved: int, started_ms: int, **extra: Any) -> dict[str, Any]:
    return {
        "Status": status,
        "SourceArn": DLQ_ARN,
        "ApproximateNumberOfMessagesMoved": moved,
        "ApproximateNumberOfMessagesToMove": 10,
        "StartedTimestamp": started_ms,
        **extra,
    }


def test_start_with_destination_and_rate(cli: Invoke, stub: Stubber) -> None:
    expect_arn(stub, DLQ_URL, DLQ_ARN)
    expect_arn(stub, SOURCE_URL, SOURCE_ARN)
    stub.add_response(
        "start_message_move_task",
        {"TaskHandle": HANDLE},
        {"SourceArn": DLQ_ARN, "DestinationArn": SOURCE_ARN, "MaxNumberOfMessagesPerSecond": 50},
    )
    result = cli(
        "replay",
        "native",
        "--dlq-url",
        DLQ_URL,
        "--queue-url",
        SOURCE_URL,
        "--rate",
        "50",
    )
    assert result.exit_code == 0, result.output
    assert f"started move task: {HANDLE}" in result.output


def test_wait_follows_progress_until_complete(cli: Invoke, stub: Stubber) -> None:
    now_ms = int(time.time() * 1000)
    older = task("COMPLETED", 99, now_ms - 3_600_000)  # an earlier task for the same DLQ
    expect_arn(stub, DLQ_URL, DLQ_ARN)
    # No destination: SQS sends every message back to the queue it was dead-lettered from.
    stub.add_response("start_message_move_task", {"TaskHandle": HANDLE}, {"SourceArn": DLQ_ARN})
    expect_list(stub, task("RUNNING", 2, now_ms, TaskHandle=HANDLE), older)
    expect_list(stub, task("RUNNING", 6, now_ms, TaskHandle=HANDLE), older)
    expect_list(stub, task("COMPLETED", 10, now_ms), older)  # finished tasks lose their handle
    result = cli("replay", "native", "--dlq-url", DLQ_URL, "--wait", "--poll-interval", "0")
    assert result.exit_code == 0, result.output
    assert "move task COMPLETED: 10 message(s) moved" in result.output


def test_wait_reports_a_failed_task(cli: Invoke, stub: Stubber) -> None:
    now_ms = int(time.time() * 1000)
    expect_arn(stub, DLQ_URL, DLQ_ARN)
    stub.add_response("start_message_move_task", {"TaskHandle": HANDLE}, {"SourceArn": DLQ_ARN})
    expect_list(stub, task("FAILED", 3, now_ms, FailureReason="AWS.SimpleQueueService.Denied"))
    result = cli("replay", "native", "--dlq-url", DLQ_URL, "--wait", "--poll-interval", "0")
    assert result.exit_code == 1
    assert "move task FAILED: 3 message(s) moved" in result.output
    assert "move task ended FAILED: AWS.SimpleQueueService.Denied" in result.output


def test_list_shows_tasks(cli: Invoke, stub: Stubber) -> None:
    now_ms = int(time.time() * 1000)
    expect_arn(stub, DLQ_URL, DLQ_ARN)
    expect_list(
        stub,
        task("RUNNING", 4, now_ms, TaskHandle=HANDLE, MaxNumberOfMessagesPerSecond=20),
        task("CANCELLED", 7, now_ms - 60_000, DestinationArn=SOURCE_ARN),
    )
    result = cli("replay", "list", "--dlq-url", DLQ_URL)
    assert result.exit_code == 0, result.output
    assert "RUNNING" in result.output
    assert HANDLE in result.output
    assert "CANCELLED" in result.output
    assert SOURCE_ARN in result.output
    assert "(original source)" in result.output


def test_cancel(cli: Invoke, stub: Stubber) -> None:
    stub.add_response(
        "cancel_message_move_task",
        {"ApproximateNumberOfMessagesMoved": 4},
        {"TaskHandle": HANDLE},
    )
    result = cli("replay", "cancel", HANDLE)
    assert result.exit_code == 0, result.output
    assert "cancelled; 4 message(s) had been moved" in result.output


def test_cancel_of_an_unknown_task_is_one_line(cli: Invoke, stub: Stubber) -> None:
    stub.add_client_error(
        "cancel_message_move_task",
        service_error_code="ResourceNotFoundException",
        service_message="The resource that you specified for the TaskHandle parameter is invalid",
    )
    result = cli("replay", "cancel", "nope")
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert "ResourceNotFoundException" in result.output


def test_rate_out_of_range_is_one_line(cli: Invoke) -> None:
    result = cli("replay", "native", "--dlq-url", DLQ_URL, "--rate", "0")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert result.output.startswith("error: Invalid value for '--rate'")


def test_find_task_ignores_older_finished_tasks() -> None:
    mine = MoveTask(status="COMPLETED", source_arn=DLQ_ARN, moved=5, started_ms=2_000_000)
    old = MoveTask(status="COMPLETED", source_arn=DLQ_ARN, moved=9, started_ms=1_000_000)
    assert find_task([old, mine], HANDLE, started_after_ms=2_000_000) == mine
    assert find_task([old], HANDLE, started_after_ms=2_000_000) is None
