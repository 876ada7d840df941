"""`status`'s numbers: queue depths per consumer, pending records by the function's scope."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from exactly_once import ErrorInfo, IdempotencyStore
from exactly_once_ops.status import QueueDepth, stack_status
from tests.conftest import FakeClock

OUTPUTS = {
    "OrdersQueueUrl": "q/orders",
    "OrdersDeadLetterQueueUrl": "q/orders-dlq",
    "OrdersFunctionName": "orders-fn",
    "PaymentsQueueUrl": "q/payments.fifo",
    "PaymentsFunctionName": "payments-fn",
    "IdempotencyTableName": "t",
}
DEPTHS = {"q/orders": (4, 2, 1), "q/orders-dlq": (3, 0, 0), "q/payments.fifo": (0, 1, 0)}


class FakeSqs:
    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> Any:
        visible, in_flight, delayed = DEPTHS[QueueUrl]
        return {
            "Attributes": {
                "ApproximateNumberOfMessages": str(visible),
                "ApproximateNumberOfMessagesNotVisible": str(in_flight),
                "ApproximateNumberOfMessagesDelayed": str(delayed),
            }
        }


class FakeLambda:
    """Orders runs with its own scope; reading Payments' configuration is denied."""

    def get_function_configuration(self, FunctionName: str) -> Any:
        if FunctionName == "payments-fn":
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "Get")
        return {"Environment": {"Variables": {"CONSUMER_SCOPE": "shop-orders"}}}


def test_depths_and_pending_records_per_consumer(
    ddb: Any, fresh_idempotency_table: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(fresh_idempotency_table, client=ddb, clock=clock)
    assert store.acquire("shop-orders", "a", lease_ms=60_000, owner="w:1").acquired
    assert store.acquire("shop-orders", "b", lease_ms=60_000, owner="w:1").acquired
    lock = store.acquire("payments", "p", lease_ms=60_000, owner="w:2").lock
    assert lock is not None
    store.fail(lock, ErrorInfo("PermanentError", "bad", retryable=False))
    assert store.acquire("orders", "other-scope", lease_ms=60_000, owner="w:3").acquired

    status = stack_status(FakeSqs(), FakeLambda(), store, OUTPUTS)  # type: ignore[arg-type]

    orders, payments = status.consumers
    assert (orders.consumer, orders.scope) == ("orders", "shop-orders")
    assert orders.queue == QueueDepth(visible=4, in_flight=2, delayed=1)
    assert orders.dead_letters.total == 3
    assert (orders.in_progress, orders.failed) == (2, 0)
    assert (payments.consumer, payments.scope) == ("payments", "payments")  # the default
    assert payments.dead_letters == QueueDepth(0, 0, 0)  # no DLQ output
    assert (payments.in_progress, payments.failed) == (0, 1)
    assert not status.pending_capped


class SubscriberLambda:
    def get_function_configuration(self, FunctionName: str) -> Any:
        return {"Environment": {"Variables": {"SUBSCRIBER_SCOPE": f"scope-of-{FunctionName}"}}}


def test_a_topic_subscriber_shows_its_dlq_and_pending_records(
    ddb: Any, fresh_idempotency_table: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(fresh_idempotency_table, client=ddb, clock=clock)
    assert store.acquire("scope-of-sales-fn", "s-1", lease_ms=60_000, owner="w:1").acquired
    outputs = {
        **OUTPUTS,
        "SalesTopicArn": "arn:aws:sns:us-east-1:123456789012:sales",
        "SalesCounterFunctionName": "sales-fn",
        "SalesCounterDeadLetterQueueUrl": "q/orders-dlq",  # depths (3, 0, 0)
        "PaymentsApiFunctionName": "api-fn",  # an API: a function without a DLQ
    }
    status = stack_status(FakeSqs(), SubscriberLambda(), store, outputs)  # type: ignore[arg-type]
    assert [c.consumer for c in status.consumers] == ["orders", "payments"]
    (sales,) = status.subscribers
    assert (sales.subscriber, sales.scope) == ("salescounter", "scope-of-sales-fn")
    assert sales.dead_letters == QueueDepth(visible=3, in_flight=0, delayed=0)
    assert (sales.in_progress, sales.failed) == (1, 0)
