"""`replay native|list|cancel`: message-move tasks via botocore's Stubber; moto lacks them."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto.server import ThreadedMotoServer

from exactly_once_ops.move_tasks import MoveTask, find_task, is_unsupported
from exactly_once_ops.targets import AwsTarget
from tests.cli.support import REGION, Invoke, QueuePair

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


@pytest.fixture
def moto_server() -> Iterator[str]:
    """moto in server mode, as the local stack runs it: it answers with an HTML 500 page."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


UNSUPPORTED = (
    "does not support message-move tasks ({}); a local emulator such as the local stack's moto "
    "lacks them. Use `eonce replay copy` instead"
)


@pytest.mark.parametrize(
    ("command", "operation"),
    [
        (["native"], "StartMessageMoveTask"),
        (["list"], "ListMessageMoveTasks"),
    ],
)
def test_moto_server_is_reported_as_unsupported_not_as_html(
    cli: Invoke, moto_server: str, command: list[str], operation: str
) -> None:
    client = boto3.client("sqs", region_name=REGION, endpoint_url=moto_server)
    dlq = client.create_queue(QueueName="orders-queue-dlq")["QueueUrl"]
    result = cli("--endpoint-url", moto_server, "replay", *command, "--dlq-url", dlq)
    assert result.exit_code == 1
    assert result.output == (f"error: the endpoint {moto_server} {UNSUPPORTED.format(operation)}\n")


def test_in_process_moto_is_reported_as_unsupported(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    result = cli("replay", "native", "--dlq-url", orders.dlq, "--queue-url", orders.source)
    assert result.exit_code == 1
    assert result.output == f"error: SQS here {UNSUPPORTED.format('StartMessageMoveTask')}\n"
    cancelled = cli("replay", "cancel", HANDLE)
    assert cancelled.output == f"error: SQS here {UNSUPPORTED.format('CancelMessageMoveTask')}\n"


def client_error(status: int, code: str, message: str, content_type: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {
                "RequestId": "r",
                "HostId": "h",
                "HTTPStatusCode": status,
                "HTTPHeaders": {"content-type": content_type},
                "RetryAttempts": 0,
            },
        },
        "StartMessageMoveTask",
    )


@pytest.mark.parametrize(
    ("error", "unsupported"),
    [
        (client_error(500, "500", "<!doctype html>\n<title>500</title>", "text/html"), True),
        (client_error(400, "InvalidAction", "no such action", "text/xml"), True),
        (client_error(501, "InternalFailure", "not yet implemented", "application/json"), True),
        (client_error(500, "InternalError", "try again", "text/xml"), False),  # a real outage
        (client_error(502, "502", "<html>Bad Gateway</html>", "text/html"), False),  # a proxy
        (client_error(400, "AccessDenied", "no", "text/xml"), False),
    ],
)
def test_what_counts_as_unsupported(error: ClientError, unsupported: bool) -> None:
    assert is_unsupported(error) is unsupported


def test_wait_shows_rate_and_eta(cli: Invoke, stub: Stubber) -> None:
    now_ms = int(time.time() * 1000)
    expect_arn(stub, DLQ_URL, DLQ_ARN)
    stub.add_response("start_message_move_task", {"TaskHandle": HANDLE}, {"SourceArn": DLQ_ARN})
    expect_list(stub, task("RUNNING", 4, now_ms, TaskHandle=HANDLE))
    expect_list(stub, task("COMPLETED", 10, now_ms))
    result = cli("replay", "native", "--dlq-url", DLQ_URL, "--wait", "--poll-interval", "0")
    assert result.exit_code == 0, result.output
    bar = next(line for line in result.output.splitlines() if line.startswith("moving"))
    assert re.search(r"10/10 .* msg/s .*eta \S+", bar), bar
