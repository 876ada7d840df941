"""The topic workload's plan and the topic report's verdict, without a stack: what `make run`
publishes, and when its SNS section passes or fails."""

from __future__ import annotations

import json
import random
from collections import Counter

from local_aws.demo import LedgerCheck
from local_aws.sns_report import ReceiverReport, TopicReport, describe_receiver, verdict
from local_aws.sns_workload import Receiver, SentTopicWorkload, TopicWorkload, plan_sales

RECEIVERS = [
    Receiver("SalesCounter", "subscriber", "sales", "http://q/tap", "http://q/sales-dlq"),
    Receiver("Orders", "queue", "orders", "http://q/orders", "http://q/orders-dlq"),
]


def test_the_plan_repeats_sales_and_adds_poison() -> None:
    workload = TopicWorkload(sales=40, duplicate_ratio=0.25, poison=2, transient_ratio=0.5)
    plan = plan_sales(workload, "r1", random.Random(3))
    assert (len(plan.messages), plan.duplicates, plan.poison) == (40, 10, 2)
    bodies = [m.body for m in plan.messages]
    sales = [json.loads(b) for b in bodies if b not in plan.poison_bodies]
    keys = Counter(sale["orderId"] for sale in sales)
    assert set(keys) == plan.keys
    assert len(plan.keys) == 28
    assert sum(n - 1 for n in keys.values()) == 10  # each repeat is an earlier sale, verbatim
    assert all(key.startswith("s-r1-") for key in keys)
    assert any(sale.get("failTimes") == 1 for sale in sales)
    assert all(
        m.attributes == {"kind": {"DataType": "String", "StringValue": "sale"}}
        for m in plan.messages
    )


def sent(poison: int = 1) -> SentTopicWorkload:
    return SentTopicWorkload(
        run_id="r1",
        topic="Sales",
        topic_arn="arn:aws:sns:us-east-1:123456789012:sales",
        published=10,
        duplicates=2,
        redelivered=3,
        poison=poison,
        expected_keys=[f"s-r1-{n}" for n in range(7)],
        receivers=RECEIVERS,
        dead_letters_before={},
        throughput=100.0,
    )


def ledger(once: int = 7, doubles: dict[str, int] | None = None) -> LedgerCheck:
    return LedgerCheck(
        expected=7,
        executed_once=once,
        double_effects=doubles or {},
        missing={f"s-r1-{n}" for n in range(once, 7)},
        unexpected=set(),
    )


def report(
    sales_ledger: LedgerCheck, orders_dead: dict[str, int], drained: bool = True
) -> TopicReport:
    counts = {"delivered": 13, "attempts": 15, "processed": 7, "duplicate": 5, "raised": 2}
    return TopicReport(
        sent=sent(),
        receivers=[
            ReceiverReport(RECEIVERS[0], counts, {"NonJsonBody": 1}, sales_ledger),
            ReceiverReport(RECEIVERS[1], None, orders_dead, ledger()),
        ],
        drained=drained,
        elapsed_s=1.0,
    )


def test_every_receiver_once_and_the_poison_in_each_dlq_passes() -> None:
    passed = report(ledger(), {"NonJsonBody": 1})
    assert passed.ok
    assert verdict(passed) == (
        "TOPIC EXACTLY ONCE: 7/7 keys executed once in each of SalesCounter (sales), "
        "Orders (orders); 2 re-published and 3 redelivered message(s) suppressed, "
        "1 poison message(s) in each DLQ"
    )
    rows = dict(describe_receiver(passed.receivers[0]))
    assert rows["SalesCounter (Lambda subscriber): SNS deliveries"] == "13"
    assert rows["  invocations, Lambda's retries included"] == "15"
    assert rows["  in SalesCounter DLQ from the topic"] == "1 (NonJsonBody: 1)"
    assert rows["  keys executed exactly once (scope sales)"] == "7/7"
    orders = dict(describe_receiver(passed.receivers[1]))
    assert orders["Orders (SQS subscription): messages received"] == "-"  # no counters


def test_a_double_effect_a_lost_key_or_a_missing_dead_letter_fails() -> None:
    double = report(ledger(doubles={"s-r1-0": 2}), {"NonJsonBody": 1})
    assert not double.ok
    assert "executed twice or more: 1 ['s-r1-0']" in verdict(double)
    lost = report(ledger(once=6), {"NonJsonBody": 1})
    assert not lost.ok
    assert "SalesCounter: 6/7 once" in verdict(lost)
    assert "missing=['s-r1-6']" in verdict(lost)
    undelivered = report(ledger(), {})
    assert not undelivered.ok
    assert "Orders: 7/7 once" in verdict(undelivered)
    assert "dead-lettered 0 of 1 poison" in verdict(undelivered)
    assert not report(ledger(), {"NonJsonBody": 1}, drained=False).ok
    assert verdict(report(ledger(), {"NonJsonBody": 1}, drained=False)).startswith(
        "TOPIC CHECK FAILED: drained=False"
    )
