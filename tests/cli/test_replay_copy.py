"""`replay copy`: DLQ -> source by receive/filter/send/delete, against in-process moto SQS."""

from __future__ import annotations

import base64
import errno
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import EndpointConnectionError

from exactly_once_ops.replay import BackupFile, Pacer, replay_dedup_id, replay_message
from exactly_once_ops.send import batch_entry
from tests.cli.support import Invoke, QueuePair, counts, drain, inject_failures

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef, MessageTypeDef

Hooks = Callable[[Callable[["SQSClient"], None]], None]
FAST = ("--wait-seconds", "0")


def dead_letter(
    sqs: SQSClient,
    dlq: str,
    body: str,
    attributes: dict[str, MessageAttributeValueTypeDef] | None = None,
) -> str:
    """Put a message straight into a standard DLQ, as the layer does; returns its id."""
    return sqs.send_message(QueueUrl=dlq, MessageBody=body, MessageAttributes=attributes or {})[
        "MessageId"
    ]


def layer_marks(error_type: str) -> dict[str, MessageAttributeValueTypeDef]:
    """The `eo-*` attributes the layer puts on messages it dead-letters itself."""
    return {
        "eo-error-type": {"DataType": "String", "StringValue": error_type},
        "eo-error-message": {"DataType": "String", "StringValue": "boom"},
        "eo-consumer": {"DataType": "String", "StringValue": "orders"},
        "eo-original-message-id": {"DataType": "String", "StringValue": "m-original"},
        "eo-attempt": {"DataType": "Number", "StringValue": "3"},
    }


def order(order_id: str) -> str:
    return json.dumps({"orderId": order_id})


def test_moves_everything_back_preserving_attributes(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    binary: dict[str, MessageAttributeValueTypeDef] = {
        "blob": {"DataType": "Binary", "BinaryValue": b"\x01\x02\xff"}
    }
    marked: dict[str, MessageAttributeValueTypeDef] = {**layer_marks("NonJsonBody"), **binary}
    dead_letter(sqs, orders.dlq, "not json at all", marked)
    for i in range(11):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    # No --queue-url: the destination is the queue whose redrive policy names this DLQ.
    result = cli("replay", "copy", "--dlq-url", orders.dlq, *FAST)
    assert result.exit_code == 0, result.output
    assert counts(sqs, orders.dlq) == (0, 0)
    moved = drain(sqs, orders.source)
    assert sorted(m["Body"] for m in moved) == sorted(
        ["not json at all", *(order(f"o-{i}") for i in range(11))]
    )
    (poison,) = [m for m in moved if m["Body"] == "not json at all"]
    attrs = poison["MessageAttributes"]
    assert set(attrs) == {*layer_marks("x"), "blob"}
    assert attrs["eo-error-type"]["StringValue"] == "NonJsonBody"
    assert attrs["eo-attempt"] == {"DataType": "Number", "StringValue": "3"}
    assert attrs["blob"]["BinaryValue"] == b"\x01\x02\xff"
    assert "replay copy" in result.output


def test_default_long_poll_ends_when_the_dlq_is_empty(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    dead_letter(sqs, orders.dlq, order("o-1"))
    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--queue-url", orders.source)
    assert result.exit_code == 0, result.output
    assert [m["Body"] for m in drain(sqs, orders.source)] == [order("o-1")]


def test_filters_leave_non_matching_messages_visible_in_the_dlq(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    for i in range(3):
        dead_letter(sqs, orders.dlq, f"garbage-{i}", layer_marks("NonJsonBody"))
    for i in range(2):
        dead_letter(sqs, orders.dlq, order(f"t-{i}"), layer_marks("Timeout"))
    dead_letter(sqs, orders.dlq, order("vip-1"))
    dead_letter(
        sqs,
        orders.dlq,
        order("tagged-1"),
        {"tenant": {"DataType": "String", "StringValue": "acme"}},
    )

    by_error = cli("replay", "copy", "--dlq-url", orders.dlq, "--error-type", "NonJsonBody", *FAST)
    assert by_error.exit_code == 0, by_error.output
    assert sorted(m["Body"] for m in drain(sqs, orders.source)) == [
        "garbage-0",
        "garbage-1",
        "garbage-2",
    ]
    assert counts(sqs, orders.dlq) == (4, 0)  # the rest is visible again, not in flight

    by_body = cli("replay", "copy", "--dlq-url", orders.dlq, "--match-body", "vip", *FAST)
    assert by_body.exit_code == 0, by_body.output
    assert [m["Body"] for m in drain(sqs, orders.source)] == [order("vip-1")]

    by_regex = cli(
        "replay", "copy", "--dlq-url", orders.dlq, "--match-body", r'"t-\d"', "--regex", *FAST
    )
    assert by_regex.exit_code == 0, by_regex.output
    assert sorted(m["Body"] for m in drain(sqs, orders.source)) == [order("t-0"), order("t-1")]

    by_attr = cli(
        "replay", "copy", "--dlq-url", orders.dlq, "--match-attribute", "tenant=acme", *FAST
    )
    assert by_attr.exit_code == 0, by_attr.output
    assert [m["Body"] for m in drain(sqs, orders.source)] == [order("tagged-1")]
    assert counts(sqs, orders.dlq) == (0, 0)


def test_dry_run_changes_nothing(cli: Invoke, sqs: SQSClient, orders: QueuePair) -> None:
    ids = [dead_letter(sqs, orders.dlq, order(f"o-{i}")) for i in range(5)]
    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--peek", *FAST)
    assert result.exit_code == 0, result.output
    assert counts(sqs, orders.dlq) == (5, 0)
    assert counts(sqs, orders.source) == (0, 0)
    for message_id in ids:
        assert message_id in result.output
    assert "would move 5 message(s)" in result.output
    assert "dry run: nothing changed" in result.output


def test_keep_copies_and_backup_records_each_moved_message(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, tmp_path: Path
) -> None:
    blob: dict[str, MessageAttributeValueTypeDef] = {
        "blob": {"DataType": "Binary", "BinaryValue": b"\x00bin"}
    }
    original_ids = [dead_letter(sqs, orders.dlq, order(f"o-{i}"), blob) for i in range(3)]
    backup = tmp_path / "moved.jsonl"
    backup.write_text('{"earlier": "line"}\n', encoding="utf-8")  # appended to, not replaced
    result = cli(
        "replay", "copy", "--dlq-url", orders.dlq, "--keep", "--backup", str(backup), *FAST
    )
    assert result.exit_code == 0, result.output
    assert counts(sqs, orders.dlq) == (3, 0)  # kept, and visible again
    copies = {m["MessageId"]: m for m in drain(sqs, orders.source)}
    assert len(copies) == 3
    lines = backup.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"earlier": "line"}
    records = [json.loads(line) for line in lines[1:]]
    assert sorted(r["originalMessageId"] for r in records) == sorted(original_ids)
    for record in records:
        copy = copies[record["newMessageId"]]  # replays get NEW message ids
        assert record["newMessageId"] not in original_ids
        assert record["body"] == copy["Body"]
        assert record["messageAttributes"] == {
            "blob": {"DataType": "Binary", "BinaryValue": base64.b64encode(b"\x00bin").decode()}
        }
        assert record["sourceQueueUrl"] == orders.dlq
        assert record["destinationQueueUrl"] == orders.source
        assert record["messageGroupId"] is None
        assert record["time"].endswith("+00:00")


def test_deletes_only_entries_confirmed_sent(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, sqs_hooks: Hooks
) -> None:
    bad = {dead_letter(sqs, orders.dlq, order(f"fail-{i}")) for i in range(2)}
    for i in range(8):
        dead_letter(sqs, orders.dlq, order(f"ok-{i}"))
    sqs_hooks(
        lambda client: inject_failures(
            client, "SendMessageBatch", lambda entry: "fail" in entry["MessageBody"]
        )
    )
    result = cli("replay", "copy", "--dlq-url", orders.dlq, *FAST)
    assert result.exit_code == 1
    for message_id in bad:
        assert f"failed send {message_id}: InternalError: injected" in result.output
    assert sorted(m["Body"] for m in drain(sqs, orders.source)) == sorted(
        order(f"ok-{i}") for i in range(8)
    )
    left = drain(sqs, orders.dlq)  # visible again right away, not waiting out the timeout
    assert {m["MessageId"] for m in left} == bad


def test_failed_delete_is_reported(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, sqs_hooks: Hooks
) -> None:
    first = dead_letter(sqs, orders.dlq, order("o-1"))
    dead_letter(sqs, orders.dlq, order("o-2"))
    sqs_hooks(
        lambda client: inject_failures(
            client, "DeleteMessageBatch", lambda entry: entry["Id"] == "0", "ReceiptHandleIsInvalid"
        )
    )
    result = cli("replay", "copy", "--dlq-url", orders.dlq, *FAST)
    assert result.exit_code == 1
    assert f"failed delete {first}: ReceiptHandleIsInvalid: sent to the destination" in (
        result.output
    )
    assert len(drain(sqs, orders.source)) == 2
    assert [m["MessageId"] for m in drain(sqs, orders.dlq)] == [first]  # not deleted


def test_limit_moves_at_most_n(cli: Invoke, sqs: SQSClient, orders: QueuePair) -> None:
    for i in range(7):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--limit", "3", *FAST)
    assert result.exit_code == 0, result.output
    assert len(drain(sqs, orders.source)) == 3
    assert counts(sqs, orders.dlq) == (4, 0)


def fifo_dead_letters(sqs: SQSClient, pair: QueuePair) -> list[tuple[str, str, str]]:
    """Payments in two account groups, sent to the FIFO DLQ: (paymentId, group, dedup id)."""
    sent = []
    for i, account in enumerate(["acct-1", "acct-2", "acct-1", "acct-2", "acct-1"]):
        payment = f"p-{i}"
        dedup = f"orig-{payment}"
        sqs.send_message(
            QueueUrl=pair.dlq,
            MessageBody=json.dumps({"paymentId": payment, "accountId": account}),
            MessageGroupId=account,
            MessageDeduplicationId=dedup,
            MessageAttributes={"eo-error-type": {"DataType": "String", "StringValue": "Boom"}},
        )
        sent.append((payment, account, dedup))
    return sent


@pytest.mark.parametrize("keep_dedup_id", [False, True])
def test_fifo_keeps_group_order_and_dedup_id(
    cli: Invoke, sqs: SQSClient, payments: QueuePair, keep_dedup_id: bool
) -> None:
    sent = fifo_dead_letters(sqs, payments)
    extra = ["--keep-dedup-id"] if keep_dedup_id else []
    result = cli("replay", "copy", "--dlq-url", payments.dlq, *extra, *FAST)
    assert result.exit_code == 0, result.output
    moved = drain(sqs, payments.source)
    expected = {
        payment: (group, dedup if keep_dedup_id else replay_dedup_id(dedup))
        for payment, group, dedup in sent
    }
    got = {
        json.loads(m["Body"])["paymentId"]: (
            m["Attributes"]["MessageGroupId"],
            m["Attributes"]["MessageDeduplicationId"],
        )
        for m in moved
    }
    assert got == expected
    for account in ("acct-1", "acct-2"):
        order_in_group = [
            json.loads(m["Body"])["paymentId"]
            for m in moved
            if m["Attributes"]["MessageGroupId"] == account
        ]
        assert order_in_group == [p for p, g, _ in sent if g == account]
    assert all(m["MessageAttributes"]["eo-error-type"]["StringValue"] == "Boom" for m in moved)
    assert counts(sqs, payments.dlq) == (0, 0)


def test_bad_regex_is_a_one_line_error(cli: Invoke, orders: QueuePair) -> None:
    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--match-body", "(", "--regex")
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("error: --match-body: bad regular expression")


def test_pacer_spaces_batches_to_the_rate() -> None:
    now = [100.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    pacer = Pacer(5.0, clock=lambda: now[0])
    for _ in range(3):
        pacer.wait(10, sleep=sleep)
    # 10 messages at 5/s take 2 s: the 2nd batch waits until t+2, the 3rd until t+4.
    assert sleeps == [2.0, 2.0]
    assert now[0] == 104.0


def test_replayed_entry_keeps_trace_header_and_falls_back_to_the_message_id() -> None:
    received: MessageTypeDef = {
        "MessageId": "m-1",
        "ReceiptHandle": "r",
        "Body": "b",
        "Attributes": {"MessageGroupId": "g", "AWSTraceHeader": "Root=1-abc"},
        "MessageAttributes": {
            "n": {"DataType": "Number", "StringValue": "1", "StringListValues": []}
        },
    }
    entry = batch_entry("0", replay_message(received, fifo_destination=True))
    assert entry == {
        "Id": "0",
        "MessageBody": "b",
        "MessageAttributes": {"n": {"DataType": "Number", "StringValue": "1"}},
        "MessageGroupId": "g",
        "MessageDeduplicationId": replay_dedup_id("m-1"),
        "MessageSystemAttributes": {
            "AWSTraceHeader": {"DataType": "String", "StringValue": "Root=1-abc"}
        },
    }
    standard = batch_entry("0", replay_message(received, fifo_destination=False))
    assert "MessageGroupId" not in standard
    assert "MessageDeduplicationId" not in standard


def test_dry_run_words_every_count_as_hypothetical(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    for i in range(4):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    dead_letter(sqs, orders.dlq, "not json", layer_marks("NonJsonBody"))
    result = cli(
        "replay", "copy", "--dlq-url", orders.dlq, "--match-body", "orderId", "--dry-run", *FAST
    )
    assert result.exit_code == 0, result.output
    assert "moved" not in result.output
    header = next(line for line in result.output.splitlines() if "would delete from DLQ" in line)
    assert [cell.strip() for cell in header.strip("┃ ").split("┃")] == [
        "would move",
        "would delete from DLQ",
        "not matching",
        "left in DLQ",
    ]
    kept = cli("replay", "copy", "--dlq-url", orders.dlq, "--keep", "--dry-run", *FAST)
    assert "would copy 5 message(s)" in kept.output
    assert counts(sqs, orders.dlq) == (5, 0)


def test_progress_shows_rate_and_eta(cli: Invoke, sqs: SQSClient, orders: QueuePair) -> None:
    for i in range(25):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    result = cli("replay", "copy", "--dlq-url", orders.dlq, *FAST)
    assert result.exit_code == 0, result.output
    bar = next(line for line in result.output.splitlines() if "25/25" in line)
    assert re.search(r"25/25 .* msg/s .*eta \S+", bar), bar


def test_bad_backup_path_fails_before_the_dlq_is_touched(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, tmp_path: Path
) -> None:
    dead_letter(sqs, orders.dlq, order("o-1"))
    missing = tmp_path / "no-such-dir" / "moved.jsonl"
    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--backup", str(missing), *FAST)
    assert result.exit_code == 2
    assert result.output == f"error: --backup {missing}: No such file or directory\n"
    assert counts(sqs, orders.source) == (0, 0)
    (untouched,) = drain(sqs, orders.dlq)
    assert untouched["Attributes"]["ApproximateReceiveCount"] == "1"  # this drain only


def test_each_backup_line_is_on_disk_before_its_message_is_deleted(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, sqs_hooks: Hooks, tmp_path: Path
) -> None:
    for i in range(25):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    backup = tmp_path / "moved.jsonl"
    deletes: list[tuple[int, int]] = []  # (lines on disk, entries to delete) per call

    def check(params: dict[str, Any], **_: Any) -> None:
        deletes.append(
            (len(backup.read_text(encoding="utf-8").splitlines()), len(params["Entries"]))
        )

    sqs_hooks(
        lambda client: client.meta.events.register(
            "before-parameter-build.sqs.DeleteMessageBatch", check
        )
    )
    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--backup", str(backup), *FAST)
    assert result.exit_code == 0, result.output
    deleted = 0
    for lines, entries in deletes:
        deleted += entries
        assert lines >= deleted
    assert deleted == 25


def test_backup_failure_after_moves_keeps_unbacked_messages_and_says_how_far_it_got(
    cli: Invoke,
    sqs: SQSClient,
    orders: QueuePair,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for i in range(25):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    backup = tmp_path / "moved.jsonl"
    write = BackupFile.write
    written: list[int] = []

    def disk_fills_up(self: BackupFile, record: dict[str, Any]) -> None:
        if len(written) == 12:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        write(self, record)
        written.append(1)

    monkeypatch.setattr(BackupFile, "write", disk_fills_up)
    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--backup", str(backup), *FAST)
    assert result.exit_code == 1
    # The 2nd batch of 10 was sent; only its 2 backed-up messages left the DLQ.
    assert result.output.splitlines()[-1] == (
        f"error: {backup}: No space left on device; so far moved 20 message(s) "
        "(12 deleted from the DLQ), 13 left in the DLQ"
    )
    assert len(backup.read_text(encoding="utf-8").splitlines()) == 12
    assert len(drain(sqs, orders.source)) == 20
    assert counts(sqs, orders.dlq) == (13, 0)  # visible again, not waiting out the timeout


def test_a_full_disk_is_found_at_the_first_line(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    for i in range(3):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--backup", "/dev/full", *FAST)
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        "error: /dev/full: No space left on device; so far moved 3 message(s) "
        "(0 deleted from the DLQ), 3 left in the DLQ"
    )
    assert counts(sqs, orders.dlq) == (3, 0)


def test_an_aws_error_after_moves_says_how_far_it_got(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, sqs_hooks: Hooks
) -> None:
    for i in range(25):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    receives = iter(range(100))

    def third_receive_fails(**_: Any) -> None:
        if next(receives) == 2:
            raise EndpointConnectionError(endpoint_url="http://dlq.invalid")

    sqs_hooks(
        lambda client: client.meta.events.register(
            "before-call.sqs.ReceiveMessage", third_receive_fails
        )
    )
    result = cli("replay", "copy", "--dlq-url", orders.dlq, *FAST)
    assert result.exit_code == 1
    (line,) = result.output.splitlines()[-1:]
    assert line.startswith('error: Could not connect to the endpoint URL: "http://dlq.invalid"')
    assert line.endswith(
        "; so far moved 20 message(s) (20 deleted from the DLQ), 5 left in the DLQ"
    )


def test_ctrl_c_says_how_many_moved(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, sqs_hooks: Hooks
) -> None:
    for i in range(25):
        dead_letter(sqs, orders.dlq, order(f"o-{i}"))
    sends = iter(range(100))

    def ctrl_c_at_third_send(**_: Any) -> None:
        if next(sends) == 2:
            raise KeyboardInterrupt

    sqs_hooks(
        lambda client: client.meta.events.register(
            "before-call.sqs.SendMessageBatch", ctrl_c_at_third_send
        )
    )
    result = cli("replay", "copy", "--dlq-url", orders.dlq, *FAST)
    assert result.exit_code == 130
    assert result.output.splitlines()[-1] == (
        "interrupted: moved 20 message(s) (20 deleted from the DLQ), 5 left in the DLQ"
    )
    assert len(drain(sqs, orders.source)) == 20
    assert counts(sqs, orders.dlq) == (5, 0)  # the unsent batch is visible again


def test_a_replay_ends_although_what_it_moved_keeps_failing_back_into_the_dlq(
    cli: Invoke,
    sqs: SQSClient,
    orders: QueuePair,
    sqs_hooks: Callable[[Callable[[SQSClient], None]], None],
) -> None:
    """With the consumers polling, a replayed poison message is dead-lettered again at once:
    by the layer (a new message naming the replayed one in `eo-original-message-id`). The
    replay must not take it again, or a run without --limit never ends."""

    def consumers_fail_again(client: SQSClient) -> None:
        def dead_letter_again(parsed: dict[str, Any], **_: Any) -> None:
            for entry in parsed.get("Successful", []):
                marks = layer_marks("NonJsonBody")
                marks["eo-original-message-id"] = {
                    "DataType": "String",
                    "StringValue": entry["MessageId"],
                }
                dead_letter(sqs, orders.dlq, "still not json", marks)

        client.meta.events.register("after-call.sqs.SendMessageBatch", dead_letter_again)

    sqs_hooks(consumers_fail_again)
    for _ in range(3):
        dead_letter(sqs, orders.dlq, "still not json", layer_marks("NonJsonBody"))

    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--queue-url", orders.source, *FAST)

    assert result.exit_code == 0, result.output
    assert "came back failed" in result.output
    assert len(drain(sqs, orders.source)) == 3  # each original moved once, none twice
    assert counts(sqs, orders.dlq) == (3, 0)  # the three that came back wait for a person
