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
from local_aws.demo_report import build_report
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
    sent = SentWorkload(
        run_id="r1",
        batches=[SentBatch("Orders", len(plan.messages), 0, plan.poison, 1.0)],
        expected_keys=[],
        dead_letters_before={},
    )
    report = build_report(
        client,
        NoLedger(),
        {"OrdersDeadLetterQueueUrl": dlq},
        sent,
        totals=None,
        drained=True,
        elapsed_s=1.0,
    )
    assert sum(report.dead_letters["Orders"].values()) == plan.poison  # not plan.poison + 1
    assert report.ok
