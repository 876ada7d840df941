"""`replay copy` with a filter on a FIFO DLQ: messages that stay must not hide the rest.

SQS FIFO returns no later message of a group while an earlier one is in flight, and at most 10
of a group per receive. Non-matching messages at the head of a group once stalled a filtered
replay (104 of 300 moved, exit 0). One run must now move every matching message it can reach,
and say how many it could not reach, and why, with exit code 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.cli.support import Invoke, QueuePair, counts, drain, inject_failures

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

FAST = ("--wait-seconds", "0")
Hooks = Callable[[Callable[["SQSClient"], None]], None]


def put(sqs: SQSClient, pair: QueuePair, group: str, index: int, error_type: str) -> str:
    """One dead-lettered payment in `group`; returns its paymentId."""
    payment = f"{group}-p{index}"
    sqs.send_message(
        QueueUrl=pair.dlq,
        MessageBody=json.dumps({"paymentId": payment, "accountId": group}),
        MessageGroupId=group,
        MessageDeduplicationId=payment,
        MessageAttributes={"eo-error-type": {"DataType": "String", "StringValue": error_type}},
    )
    return payment


def fill(sqs: SQSClient, pair: QueuePair, plan: dict[str, str]) -> dict[str, list[str]]:
    """Send each group's messages, `T` = Timeout (to replay), `N` = NonJsonBody (to keep).

    Groups are interleaved round-robin, as a live queue would dead-letter them. Returns each
    group's Timeout paymentIds in order.
    """
    wanted: dict[str, list[str]] = {group: [] for group in plan}
    for index in range(max(len(kinds) for kinds in plan.values())):
        for group, kinds in plan.items():
            if index < len(kinds):
                timeout = kinds[index] == "T"
                payment = put(sqs, pair, group, index, "Timeout" if timeout else "NonJsonBody")
                if timeout:
                    wanted[group].append(payment)
    return wanted


def moved_by_group(sqs: SQSClient, queue_url: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for message in drain(sqs, queue_url):
        body = json.loads(message["Body"])
        assert message["Attributes"]["MessageGroupId"] == body["accountId"]
        out.setdefault(body["accountId"], []).append(body["paymentId"])
    return out


def replay_timeouts(cli: Invoke, pair: QueuePair, *extra: str) -> tuple[int, str]:
    result = cli("replay", "copy", "--dlq-url", pair.dlq, "--error-type", "Timeout", *extra, *FAST)
    return result.exit_code, result.output


def test_one_run_moves_every_match_behind_non_matching_heads(
    cli: Invoke, sqs: SQSClient, payments: QueuePair
) -> None:
    # 6 groups x 50 = 300 messages; each group starts with a non-matching one and has 9 in all
    # (every 6th), so every matching message can be reached.
    plan = {f"acct-{g}": "".join("N" if i % 6 == 0 else "T" for i in range(50)) for g in range(6)}
    wanted = fill(sqs, payments, plan)
    code, output = replay_timeouts(cli, payments)
    assert code == 0, output
    assert moved_by_group(sqs, payments.source) == wanted  # all 246, in group order
    assert counts(sqs, payments.dlq) == (54, 0)  # the non-matching ones, visible again
    assert "warning" not in output
    left = drain(sqs, payments.dlq)
    assert {m["MessageAttributes"]["eo-error-type"]["StringValue"] for m in left} == {"NonJsonBody"}


def test_matches_behind_ten_staying_messages_are_reported(
    cli: Invoke, sqs: SQSClient, payments: QueuePair
) -> None:
    # acct-stuck: 5 matching, then 10 that stay, then 7 matching nobody can reach without
    # deleting those 10. The other groups move completely.
    plan = {
        "acct-stuck": "TTTTT" + "N" * 10 + "T" * 7,
        "acct-a": "NTTT" * 9,
        "acct-b": "T" * 40,
    }
    wanted = fill(sqs, payments, plan)
    code, output = replay_timeouts(cli, payments)
    assert code == 1, output
    moved = moved_by_group(sqs, payments.source)
    assert moved["acct-a"] == wanted["acct-a"]
    assert moved["acct-b"] == wanted["acct-b"]
    assert moved["acct-stuck"] == wanted["acct-stuck"][:5]
    assert "warning: 7 message(s) in the DLQ were never examined, and some may match" in output
    assert (
        "warning: FIFO group(s) acct-stuck start with 10 messages that stay in the DLQ "
        "(not matching, or failed), and SQS returns no later message of a group until those "
        "are deleted"
    ) in output
    non_matching_a = plan["acct-a"].count("N")
    assert counts(sqs, payments.dlq) == (10 + 7 + non_matching_a, 0)

    # Once the head is out of the way, the rest moves.
    skipped = cli("replay", "copy", "--dlq-url", payments.dlq, "--error-type", "NonJsonBody", *FAST)
    assert skipped.exit_code == 0, skipped.output
    drain(sqs, payments.source)
    code, output = replay_timeouts(cli, payments)
    assert code == 0, output
    assert moved_by_group(sqs, payments.source) == {"acct-stuck": wanted["acct-stuck"][5:]}


def test_a_failed_send_holds_back_the_rest_of_its_group(
    cli: Invoke, sqs: SQSClient, payments: QueuePair, sqs_hooks: Hooks
) -> None:
    plan = {"acct-1": "NT" * 15, "acct-2": "T" * 20}
    wanted = fill(sqs, payments, plan)
    # The first receive holds acct-1's p0-p4: fail p3, its last match there. (Entries after a
    # failed one in the same SendMessageBatch may already have gone; SQS decides that.)
    failing = wanted["acct-1"][1]
    sqs_hooks(
        lambda client: inject_failures(
            client, "SendMessageBatch", lambda entry: failing in entry["MessageBody"]
        )
    )
    code, output = replay_timeouts(cli, payments)
    assert code == 1, output
    moved = moved_by_group(sqs, payments.source)
    assert moved["acct-2"] == wanted["acct-2"]
    assert moved["acct-1"] == wanted["acct-1"][:1]  # nothing overtook the failed one
    assert output.count(": InternalError: injected") == 1
    assert "warning: 25 message(s) in the DLQ were never examined" in output  # p5-p29
    assert "warning: FIFO group(s) acct-1 stop at a message that failed to send" in output
    assert counts(sqs, payments.dlq) == (15 + 14, 0)


def test_dry_run_says_what_it_could_not_see(
    cli: Invoke, sqs: SQSClient, payments: QueuePair
) -> None:
    fill(sqs, payments, {"acct-1": "T" * 25, "acct-2": "TN" * 3})
    code, output = replay_timeouts(cli, payments, "--dry-run")
    assert code == 0, output
    assert "would move 13 message(s)" in output  # 10 of acct-1, 3 of acct-2
    assert "warning: 15 message(s) in the DLQ were never examined" in output
    assert "FIFO group(s) acct-1 start with 10 messages that stay in the DLQ (a dry run" in output
    assert counts(sqs, payments.dlq) == (31, 0)
    assert counts(sqs, payments.source) == (0, 0)


def test_standard_queue_is_not_done_at_the_first_empty_short_poll(
    cli: Invoke, sqs: SQSClient, orders: QueuePair, sqs_hooks: Hooks
) -> None:
    """Short polling samples some servers only: an empty answer is not yet the end."""
    for i in range(30):
        sqs.send_message(QueueUrl=orders.dlq, MessageBody=json.dumps({"orderId": f"o-{i}"}))
    empty = sqs.create_queue(QueueName="empty")["QueueUrl"]
    receives = iter(range(100))

    def first_two_come_back_empty(params: dict[str, Any], **_: Any) -> None:
        if next(receives) < 2:
            params["QueueUrl"] = empty

    sqs_hooks(
        lambda client: client.meta.events.register(
            "before-parameter-build.sqs.ReceiveMessage", first_two_come_back_empty
        )
    )
    result = cli("replay", "copy", "--dlq-url", orders.dlq, *FAST)
    assert result.exit_code == 0, result.output
    assert len(drain(sqs, orders.source)) == 30
    assert counts(sqs, orders.dlq) == (0, 0)
