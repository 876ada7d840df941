"""`send` and its core `send_messages`, against in-process moto SQS."""

from __future__ import annotations

import base64
import json
import re
import signal
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from botocore.stub import Stubber

from exactly_once_ops.send import OutgoingMessage, send_messages
from tests.cli.support import (
    REGION,
    Invoke,
    QueuePair,
    counts,
    drain,
    inject_failures,
    make_pair,
)

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

Hooks = Callable[[Callable[["SQSClient"], None]], None]


def bodies_of(sqs: SQSClient, url: str) -> list[str]:
    return [m["Body"] for m in drain(sqs, url)]


def test_inline_bodies(cli: Invoke, sqs: SQSClient, orders: QueuePair) -> None:
    result = cli(
        "send",
        "--queue-url",
        orders.source,
        "--body",
        '{"orderId": "o-1"}',
        "--body",
        '{"orderId": "o-2"}',
    )
    assert result.exit_code == 0, result.output
    assert sorted(bodies_of(sqs, orders.source)) == ['{"orderId": "o-1"}', '{"orderId": "o-2"}']
    assert "sent" in result.output
    assert "throughput" in result.output


def test_file_body_is_sent_verbatim(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, tmp_path: Path
) -> None:
    body = tmp_path / "body.json"
    body.write_text('{\n  "orderId": "o-9",\n  "amount": 3\n}\n', encoding="utf-8")
    result = cli("send", "--queue-url", orders.source, "--file", str(body))
    assert result.exit_code == 0, result.output
    assert bodies_of(sqs, orders.source) == ['{\n  "orderId": "o-9",\n  "amount": 3\n}']


def test_jsonl_sends_one_body_per_line(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, tmp_path: Path
) -> None:
    lines = tmp_path / "orders.jsonl"
    lines.write_text(
        "\n".join(json.dumps({"orderId": f"o-{i}"}) for i in range(23)) + "\n\n", encoding="utf-8"
    )
    result = cli("send", "--queue-url", orders.source, "--jsonl", str(lines))
    assert result.exit_code == 0, result.output
    received = sorted(json.loads(b)["orderId"] for b in bodies_of(sqs, orders.source))
    assert received == sorted(f"o-{i}" for i in range(23))


def test_jsonl_with_a_bad_line_sends_nothing(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, tmp_path: Path
) -> None:
    lines = tmp_path / "orders.jsonl"
    lines.write_text('{"orderId": "o-1"}\nnot json\n', encoding="utf-8")
    result = cli("send", "--queue-url", orders.source, "--jsonl", str(lines))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"error: {lines}:2: not JSON (Expecting value)"]
    assert bodies_of(sqs, orders.source) == []


def test_count_with_duplicates_repeats_business_ids(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    result = cli(
        "send",
        "--queue-url",
        orders.source,
        "--count",
        "50",
        "--duplicates",
        "0.2",
        "--key-prefix",
        "o-",
        "--template",
        '{"orderId": "{id}", "amount": 10}',
        "--seed",
        "7",
    )
    assert result.exit_code == 0, result.output
    ids = Counter(json.loads(b)["orderId"] for b in bodies_of(sqs, orders.source))
    assert sum(ids.values()) == 50
    assert len(ids) == 40  # 10 of the 50 re-send an earlier order
    assert set(ids) == {f"o-{i}" for i in range(40)}


def test_default_template_generates_unique_order_ids(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    result = cli("send", "--queue-url", orders.source, "--count", "15", "--concurrency", "3")
    assert result.exit_code == 0, result.output
    ids = [json.loads(b)["orderId"] for b in bodies_of(sqs, orders.source)]
    assert len(ids) == 15
    assert len(set(ids)) == 15


def test_attributes_of_every_type(cli: Invoke, sqs: SQSClient, orders: QueuePair) -> None:
    blob = base64.b64encode(b"\x00\xffbinary").decode()
    result = cli(
        "send",
        "--queue-url",
        orders.source,
        "--body",
        "{}",
        "--attribute",
        "source=cli",
        "--attribute",
        "priority:Number=5",
        "--attribute",
        f"blob:Binary={blob}",
    )
    assert result.exit_code == 0, result.output
    (message,) = drain(sqs, orders.source)
    attrs = message["MessageAttributes"]
    assert attrs["source"]["DataType"] == "String"
    assert attrs["source"]["StringValue"] == "cli"
    assert attrs["priority"]["DataType"] == "Number"
    assert attrs["priority"]["StringValue"] == "5"
    assert attrs["blob"]["DataType"] == "Binary"
    assert attrs["blob"]["BinaryValue"] == b"\x00\xffbinary"


def test_bad_attribute_is_a_one_line_error(cli: Invoke, orders: QueuePair) -> None:
    result = cli("send", "--queue-url", orders.source, "--body", "{}", "--attribute", "n:Number=x")
    assert result.exit_code == 2
    assert result.output.strip() == "error: attribute 'n': 'x' is not a number"


@pytest.mark.parametrize("name", ["a b", ".lead", "trail.", "dou..ble", "AWS.Trace", "x" * 257])
def test_attribute_names_sqs_refuses_are_refused_before_sending(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, name: str
) -> None:
    """moto would store such a message and then fail every receive of it, poller and replay
    alike: the name is checked before anything leaves."""
    result = cli("send", "--queue-url", orders.source, "--body", "{}", "--attribute", f"{name}=v")
    assert result.exit_code == 2
    line = result.output.strip()
    assert line.startswith(f"error: attribute name {name!r}: SQS allows"), line
    assert counts(sqs, orders.source) == (0, 0)


def test_fifo_payments_group_by_account_with_fresh_dedup_ids(
    cli: Invoke, sqs: SQSClient, payments: QueuePair
) -> None:
    result = cli(
        "send",
        "--queue-url",
        payments.source,
        "--consumer",
        "payments",
        "--count",
        "20",
        "--groups",
        "2",
        "--duplicates",
        "0.25",
        "--seed",
        "3",
    )
    assert result.exit_code == 0, result.output
    messages = drain(sqs, payments.source)
    # Duplicates carry different dedup ids, so SQS delivers them all to the consumer.
    assert len(messages) == 20
    for message in messages:
        body = json.loads(message["Body"])
        assert message["Attributes"]["MessageGroupId"] == body["accountId"]
    assert {m["Attributes"]["MessageGroupId"] for m in messages} == {"acct-0", "acct-1"}
    assert len({m["Attributes"]["MessageDeduplicationId"] for m in messages}) == 20
    assert len({json.loads(m["Body"])["paymentId"] for m in messages}) == 15


def test_fifo_group_field_from_given_bodies(
    cli: Invoke, sqs: SQSClient, payments: QueuePair
) -> None:
    bodies = [json.dumps({"paymentId": f"p-{i}", "accountId": f"a-{i % 2}"}) for i in range(4)]
    args = [arg for body in bodies for arg in ("--body", body)]
    result = cli("send", "--queue-url", payments.source, *args, "--group-field", "accountId")
    assert result.exit_code == 0, result.output
    groups = {
        json.loads(m["Body"])["paymentId"]: m["Attributes"]["MessageGroupId"]
        for m in drain(sqs, payments.source)
    }
    assert groups == {"p-0": "a-0", "p-1": "a-1", "p-2": "a-0", "p-3": "a-1"}


def test_group_field_missing_from_a_body_sends_nothing(
    cli: Invoke, sqs: SQSClient, payments: QueuePair
) -> None:
    result = cli(
        "send",
        "--queue-url",
        payments.source,
        "--body",
        '{"accountId": "a-1"}',
        "--body",
        '{"paymentId": "p-2"}',
        "--group-field",
        "accountId",
    )
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: --group-field accountId: body has no 'accountId': '{\"paymentId\": \"p-2\"}'"
    )
    assert drain(sqs, payments.source) == []


def test_fifo_fixed_group_and_dedup_template(
    cli: Invoke, sqs: SQSClient, payments: QueuePair
) -> None:
    result = cli(
        "send",
        "--queue-url",
        payments.source,
        "--body",
        '{"paymentId": "p-1"}',
        "--body",
        '{"paymentId": "p-2"}',
        "--group-id",
        "acct-9",
        "--dedup-id",
        "run-{index}",
    )
    assert result.exit_code == 0, result.output
    messages = drain(sqs, payments.source)
    assert [m["Attributes"]["MessageGroupId"] for m in messages] == ["acct-9", "acct-9"]
    assert [m["Attributes"]["MessageDeduplicationId"] for m in messages] == ["run-0", "run-1"]


def test_fifo_content_based_dedup_is_left_to_sqs(cli: Invoke, sqs: SQSClient) -> None:
    pair = make_pair(sqs, "cbd", fifo=True, content_based=True)
    result = cli(
        "send", "--queue-url", pair.source, "--body", "same", "--body", "same", "--group-id", "g"
    )
    assert result.exit_code == 0, result.output
    # No dedup id was sent, so the queue's content-based dedup dropped the second copy.
    assert bodies_of(sqs, pair.source) == ["same"]


def test_fifo_without_group_is_a_one_line_error(
    cli: Invoke, sqs: SQSClient, payments: QueuePair
) -> None:
    result = cli("send", "--queue-url", payments.source, "--body", "{}")
    assert result.exit_code == 2
    assert result.output.strip() == "error: a FIFO queue needs --group-id or --group-field"


def test_failed_entries_are_reported_one_by_one(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, sqs_hooks: Hooks
) -> None:
    sqs_hooks(
        lambda client: inject_failures(
            client, "SendMessageBatch", lambda entry: entry["Id"] in {"3", "12"}, "ThrottledEntry"
        )
    )
    result = cli("send", "--queue-url", orders.source, "--count", "25", "--concurrency", "2")
    assert result.exit_code == 1
    assert "failed entry 3: ThrottledEntry: injected" in result.output
    assert "failed entry 12: ThrottledEntry: injected" in result.output
    assert len(drain(sqs, orders.source)) == 23


def test_send_messages_core_reports_every_entry(sqs: SQSClient, orders: QueuePair) -> None:
    batches: list[int] = []
    messages = [OutgoingMessage(body=json.dumps({"orderId": f"o-{i}"})) for i in range(95)]
    report = send_messages(sqs, orders.source, messages, concurrency=3, on_batch=batches.append)
    assert report.sent == 95
    assert report.failed == []
    assert set(report.message_ids) == {str(i) for i in range(95)}
    assert sorted(batches) == [5] + [10] * 9
    assert report.throughput > 0
    assert len(drain(sqs, orders.source)) == 95


def test_rejected_batch_fails_each_of_its_entries() -> None:
    client = boto3.client("sqs", region_name=REGION)
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/q"
    with Stubber(client) as stub:
        stub.add_client_error(
            "send_message_batch",
            service_error_code="AWS.SimpleQueueService.BatchRequestTooLong",
            service_message="Batch requests cannot be longer than 1048576 bytes",
        )
        stub.add_response(
            "send_message_batch",
            {
                "Successful": [{"Id": "10", "MessageId": "m-10", "MD5OfMessageBody": "x"}],
                "Failed": [],
            },
        )
        report = send_messages(client, url, [OutgoingMessage(body="b")] * 11, concurrency=1)
    assert report.sent == 1
    assert [f.id for f in report.failed] == [str(i) for i in range(10)]
    assert {f.code for f in report.failed} == {"AWS.SimpleQueueService.BatchRequestTooLong"}


def test_send_names_the_queue_and_the_generated_key_prefix(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    result = cli("send", "--queue-url", orders.source, "--count", "3")
    assert result.exit_code == 0, result.output
    match = re.search(r"sending 3 message\(s\) to (\S+) \(key prefix (\S+)\)", result.stderr)
    assert match is not None, result.output
    assert match.group(1) == orders.source
    prefix = match.group(2)
    assert f"key prefix │ {prefix}" in result.stdout
    assert orders.source in result.stdout
    ids = {json.loads(b)["orderId"] for b in bodies_of(sqs, orders.source)}
    assert ids == {f"{prefix}{i}" for i in range(3)}


def test_ids_out_writes_one_json_line_per_sent_message(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, tmp_path: Path
) -> None:
    out = tmp_path / "ids.jsonl"
    result = cli(
        "send",
        "--queue-url",
        orders.source,
        "--count",
        "25",
        "--key-prefix",
        "i-",
        "--ids-out",
        str(out),
    )
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["index"] for line in lines] == list(range(25))
    received = {m["MessageId"]: m["Body"] for m in drain(sqs, orders.source)}
    assert {line["messageId"]: line["body"] for line in lines} == received
    assert json.loads(lines[7]["body"])["orderId"] == "i-7"


def test_ids_out_that_cannot_be_written_sends_nothing(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    result = cli(
        "send", "--queue-url", orders.source, "--body", "{}", "--ids-out", "/nonexistent/d/ids"
    )
    assert result.exit_code == 2
    assert result.output.strip() == "error: /nonexistent/d/ids: No such file or directory"
    assert bodies_of(sqs, orders.source) == []


def test_progress_shows_rate_and_eta(cli: Invoke, orders: QueuePair) -> None:
    result = cli("send", "--queue-url", orders.source, "--count", "30")
    assert result.exit_code == 0, result.output
    (bar,) = [line for line in result.stderr.splitlines() if "30/30" in line]
    assert re.search(r"[\d,]+ msg/s .*eta \d+:\d\d:\d\d", bar), bar


def test_ctrl_c_says_how_many_were_sent(
    cli: Invoke,
    sqs: SQSClient,
    orders: QueuePair,
    sqs_hooks: Hooks,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Ctrl-C (SIGINT to the main thread) during the third batch: no new batch starts, the
    ones in flight finish, and the count said is the count on the queue.

    Python's own Ctrl-C handler is installed for the test: a shell without job control starts
    background commands with SIGINT ignored, and Python then keeps ignoring it.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    calls = 0

    def interrupt_on_third_batch(**_: object) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    sqs_hooks(
        lambda client: client.meta.events.register(
            "before-call.sqs.SendMessageBatch", interrupt_on_third_batch
        )
    )
    out = tmp_path / "ids.jsonl"
    result = cli(
        "send",
        "--queue-url",
        orders.source,
        "--count",
        "200",
        "--concurrency",
        "1",
        "--ids-out",
        str(out),
    )
    assert result.exit_code == 130, result.output
    match = re.fullmatch(
        r"interrupted: (\d+) of 200 message\(s\) sent; their ids are in (.+)",
        result.stderr.strip().splitlines()[-1],
    )
    assert match is not None, result.output
    sent = int(match.group(1))
    on_queue = drain(sqs, orders.source)
    assert 30 <= sent < 200
    assert sent == len(on_queue)
    written = [json.loads(line)["messageId"] for line in out.read_text().splitlines()]
    assert sorted(written) == sorted(m["MessageId"] for m in on_queue)
