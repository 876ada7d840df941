"""The poller names each function in its start line and counts outcomes per consumer."""

from __future__ import annotations

from collections import Counter

from local_aws.poller import BatchStats, FunctionBinding, Poller, describe_bindings
from tests.waiting import wait_until


def binding(consumer: str, batch_size: int, timeout_s: int) -> FunctionBinding:
    return FunctionBinding(
        function_name=f"Stack-{consumer}Function-ABC",
        source_dir=".",
        handler="handler.handle",
        environment={},
        timeout_s=timeout_s,
        queue_url=f"http://q/{consumer}",
        queue_arn=f"arn:aws:sqs:us-east-1:1:{consumer}",
        batch_size=batch_size,
        consumer=consumer,
    )


def test_the_start_line_names_each_function() -> None:
    bindings = [binding("Orders", 10, 3), binding("Payments", 5, 30)]
    assert describe_bindings(bindings) == (
        "Orders: batch 10, timeout 3s; Payments: batch 5, timeout 30s"
    )
    unnamed = FunctionBinding("fn-1", ".", "h.h", {}, 3, "http://q", "arn")
    assert describe_bindings([unnamed]) == "fn-1: batch 10, timeout 3s"


def test_totals_are_kept_per_consumer() -> None:
    orders, payments = binding("Orders", 10, 3), binding("Payments", 10, 3)
    poller = Poller([orders, payments], {}, workers=1)  # never started: stats fed by hand
    reports = [
        BatchStats(orders.function_name, received=3, deleted=3, outcomes=Counter(processed=3)),
        BatchStats(orders.function_name, received=1, deleted=1, outcomes=Counter(duplicate=1)),
        BatchStats(payments.function_name, received=2, deleted=1, outcomes=Counter(failed=1)),
    ]
    for stats in reports:
        poller._reports.put(stats)
    # The queue's feeder thread delivers them in the background.
    wait_until(lambda: poller.totals()["received"] >= 6, poller.totals)
    by_consumer = poller.totals_by_consumer()
    assert +by_consumer["Orders"] == Counter(processed=3, duplicate=1, received=4, deleted=4)
    assert +by_consumer["Payments"] == Counter(failed=1, received=2, deleted=1)
    assert poller.totals()["processed"] == 3
