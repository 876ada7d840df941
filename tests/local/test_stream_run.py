"""`make run`'s stream part: the workload (orders put again as a producer's retry does, poison,
transient failures, customers as partition keys) and the verdict read from the execution log.

The verdict is run end to end on real parts: the workload put to a Kinesis stream on moto, the
local mapping (`stream_poller`) invoking the library's `stream_consumer` on DynamoDB Local, the
ledger counted. With the lock the verdict holds; with the harness's lock-off switch (every
delivery its own record) it must fail, or it would prove nothing.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, PermanentError, RecordContext
from exactly_once.ledger import append_effect
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.streams import stream_consumer
from local_aws import lock_off
from local_aws.demo import DynamoLedger
from local_aws.stream_failures import SqsDestination
from local_aws.stream_poller import MappingSettings, StreamPoller
from local_aws.stream_report import (
    StreamReport,
    build_stream_report,
    describe_stream,
    order_violations,
    stream_verdict,
)
from local_aws.stream_workload import StreamWorkload, plan_stream, put_stream_workload
from tests.local.stream_support import KinesisStream

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


def test_a_put_again_order_never_comes_before_its_original() -> None:
    workload = StreamWorkload(orders=80, duplicate_ratio=0.3, poison=2, customers=3)
    plan = plan_stream(workload, "r1", random.Random(3))
    assert len(plan.records) == 80
    assert plan.duplicates == 24
    assert len(plan.keys) == 80 - 24 - 2
    seen: set[bytes] = set()
    repeats = 0
    for record in plan.records:
        repeats += record.data in seen
        seen.add(record.data)
    assert repeats == plan.duplicates  # each copy is the very record put earlier
    first_put = [r.data for r in plan.records]
    for customer, orders in plan.order_by_customer.items():
        positions = [
            next(i for i, data in enumerate(first_put) if f'"{order}"'.encode() in data)
            for order in orders
        ]
        assert positions == sorted(positions), customer


def test_order_violations_name_the_customers_whose_orders_ran_out_of_order() -> None:
    orders = {"c1": ["a", "b", "c"], "c2": ["d", "e"], "c3": ["f", "g"]}
    written = {"a": 10, "b": 10, "c": 11, "d": 20, "e": 19, "f": 5}  # g never ran
    assert order_violations(orders, written) == ["c2"]


@pytest.fixture
def queues(sqs: SQSClient) -> Iterator[tuple[str, str]]:
    urls = tuple(
        sqs.create_queue(QueueName=f"{name}-{uuid.uuid4().hex[:8]}")["QueueUrl"]
        for name in ("stream-dlq", "on-failure")
    )
    yield urls[0], urls[1]
    for url in urls:
        sqs.delete_queue(QueueUrl=url)


def run_stream_part(
    moto_endpoint: str,
    ddb: DynamoDBClient,
    sqs: SQSClient,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
    queues: tuple[str, str],
) -> StreamReport:
    dead_letter_url, on_failure_url = queues

    def order(payload: dict[str, Any], ctx: RecordContext) -> None:  # functions/order_stream's
        if payload.get("amount", 0) < 0:
            raise PermanentError("amount must be a non-negative number")
        if ctx.attempt <= int(payload.get("failTimes", 0)):
            raise RuntimeError("simulated transient failure")
        append_effect(ctx, {"kind": "order-stream"}, table=ledger_table)

    consumer = stream_consumer(
        key="orderId",
        table_name=idempotency_table,
        scope=scope,
        dead_letter_queue_url=dead_letter_url,
        dynamodb_client=ddb,
        sqs_client=sqs,
    )(order)
    stream = KinesisStream(moto_endpoint, shards=2)
    workload = StreamWorkload(orders=40, transient_ratio=0.2, customers=4, work_ms=0, seed=5)
    sent = put_stream_workload(stream.client, "OrderStream", stream.stream_name, workload)
    settings = MappingSettings(
        batch_size=10,
        bisect_on_error=True,
        # as the constructs set it: a batch's retries are shared by its records (the poller
        # counts them per batch, as Lambda appears to), and about one order in five fails once
        max_retry_attempts=10,
        report_batch_item_failures=True,
    )
    StreamPoller(
        stream.source, consumer, settings, destination=SqsDestination(sqs, on_failure_url)
    ).run_until_drained()
    return build_stream_report(
        sqs,
        DynamoLedger(ddb, ledger_table),
        sent,
        scope=scope,
        dead_letter_url=dead_letter_url,
        on_failure_url=on_failure_url,
        on_failure_before=0,
        counts={},
        read=True,
        elapsed_s=0.0,
    )


def test_the_stream_verdict_holds_with_the_lock(
    moto_endpoint: str,
    ddb: DynamoDBClient,
    sqs: SQSClient,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
    queues: tuple[str, str],
) -> None:
    report = run_stream_part(
        moto_endpoint, ddb, sqs, idempotency_table, ledger_table, scope, queues
    )
    assert report.sent.duplicates > 0
    assert report.ledger.executed_once == report.ledger.expected == 28
    assert report.dead_letters == {"NonJsonBody": 1, "PermanentError": 1}
    assert report.out_of_order == []
    assert report.on_failure == 0
    assert report.ok
    assert stream_verdict(report).startswith("STREAM EXACTLY ONCE: 28/28 orders executed once")
    rows = dict(describe_stream(report))
    assert rows["  because NonJsonBody"] == rows["  because PermanentError"] == "1"
    # the same ledger with a customer's orders out of order, or a batch given up, fails
    for broken in (replace(report, out_of_order=["customer-1"]), replace(report, on_failure=1)):
        assert not broken.ok
        assert stream_verdict(broken).startswith("STREAM CHECK FAILED")


def test_the_stream_verdict_fails_with_the_lock_off(
    moto_endpoint: str,
    ddb: DynamoDBClient,
    sqs: SQSClient,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
    queues: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for store in (IdempotencyStore, PostgresStore):
        monkeypatch.setattr(store, "acquire", store.acquire)  # restored at teardown
        monkeypatch.setattr(store, "acquire_many", store.acquire_many)
    lock_off.install()
    report = run_stream_part(
        moto_endpoint, ddb, sqs, idempotency_table, ledger_table, scope, queues
    )
    assert report.ledger.double_effects  # the orders put again ran again
    assert not report.ok
