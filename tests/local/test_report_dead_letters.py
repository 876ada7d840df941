"""`eonce report` explains only its own workload's dead letters.

It used to subtract the DLQ's size before the workload from its size after, so a message sent
by hand that dead-lettered meanwhile (docs/local.md's `failTimes: 5` example) counted against
the run: "dead-lettered 5 of 4 poison", CHECK FAILED, although every key ran exactly once. Now
the workload's messages are those whose body names its run, every poison body included.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws

from local_aws.demo import Workload, plan_orders
from local_aws.demo_report import DemoReport, build_report
from local_aws.demo_workload import SentBatch, SentWorkload

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class NoLedger:
    def counts(self, contains: str | None = None, scope: str | None = None) -> Counter[str]:
        return Counter()


@pytest.fixture
def client() -> Iterator[SQSClient]:
    with mock_aws():  # moto is fine for SQS
        yield boto3.client("sqs", region_name="us-east-1")


def orders_report(client: SQSClient, dlq: str, run_id: str, sent: int, poison: int) -> DemoReport:
    """The report of a run `run_id` that sent `sent` Orders messages, `poison` of them poison
    (no ledger: only the DLQ is read)."""
    workload = SentWorkload(
        run_id=run_id,
        batches=[SentBatch("Orders", sent, 0, poison, 1.0)],
        expected_keys=[],
        dead_letters_before={},
    )
    return build_report(
        client,
        NoLedger(),
        {"OrdersDeadLetterQueueUrl": dlq},
        workload,
        totals=None,
        drained=True,
        elapsed_s=1.0,
    )


def test_a_message_sent_by_hand_is_not_the_runs_poison(client: SQSClient) -> None:
    dlq = client.create_queue(QueueName="orders-dlq")["QueueUrl"]
    plan = plan_orders(Workload(orders=8, duplicate_ratio=0.0, poison=4), "r1", random.Random(1))
    poison = [m.body for m in plan.messages if "bad-" in m.body or "not JSON" in m.body]
    assert len(poison) == plan.poison == 4
    for body in poison:  # every poison body names the run, the JSON and the non-JSON ones
        assert "r1" in body
        client.send_message(QueueUrl=dlq, MessageBody=body)
    by_hand = json.dumps({"orderId": "o-heal-1", "amount": 5, "failTimes": 5})
    client.send_message(QueueUrl=dlq, MessageBody=by_hand)
    report = orders_report(client, dlq, "r1", len(plan.messages), plan.poison)
    assert sum(report.dead_letters["Orders"].values()) == plan.poison  # not plan.poison + 1
    assert report.ok


def _dead_letter(client: SQSClient, dlq: str, body: str, original_id: str) -> None:
    """A copy of `body` as the layer dead-letters it: its reason and the original message's id."""
    client.send_message(
        QueueUrl=dlq,
        MessageBody=body,
        MessageAttributes={
            "eo-error-type": {"DataType": "String", "StringValue": "NonJsonBody"},
            "eo-original-message-id": {"DataType": "String", "StringValue": original_id},
        },
    )


def test_a_poison_message_delivered_twice_and_dead_lettered_twice_counts_once(
    client: SQSClient,
) -> None:
    """A standard queue delivers at least once: two invocations can hold the same poison message
    at once (seen with moto's receive, which is not atomic across threads, and allowed by SQS),
    and each sends it to the DLQ with its reason. Nothing was lost and nothing ran twice, so the
    run's verdict must not fail on 'dead-lettered 2 of 1 poison' (CI saw it in
    tests/e2e/test_local_stack.py): the copies of one message count once, distinct poison
    messages each count."""
    dlq = client.create_queue(QueueName="orders-dlq")["QueueUrl"]
    _dead_letter(client, dlq, "r2 not JSON", "m-1")
    _dead_letter(client, dlq, "r2 not JSON", "m-1")  # the same message, dead-lettered again
    _dead_letter(client, dlq, "r2 not JSON either", "m-2")
    report = orders_report(client, dlq, "r2", 2, 2)
    assert report.dead_letters == {"Orders": {"NonJsonBody": 2}}  # m-1 once, m-2 once
    assert report.ok
