"""A Lambda subscribed directly to a topic: each outcome, as Lambda and SNS will see it.

Success returns; a record that must run again raises `DeliveryFailed` after its FAILED record
is written (SNS / Lambda then redeliver, and finally the on-failure DLQ keeps the event); a
permanent failure goes to the DLQ with its reason and returns, so it is not retried in vain.
"""

from __future__ import annotations

import json
import random
import threading
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import (
    DeliveryFailed,
    IdempotencyStore,
    NotificationContext,
    Outcome,
    PermanentError,
    Status,
)
from exactly_once.keys import storable_key
from fault_injection.lost_replies import install_lost_replies, lose_next
from fault_injection.throttling import install_throttling
from tests.conftest import make_ddb_client
from tests.consumer.conftest import Queues, drain, lambda_context
from tests.sns.conftest import TOPIC_ARN, MakeSubscriber, sns_event, sns_record

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from local_aws.dynamodb_local import DynamoDBLocal


def test_the_same_notification_delivered_twice_runs_once(make_subscriber: MakeSubscriber) -> None:
    ran: list[str] = []

    def count(message: Any, ctx: NotificationContext) -> dict[str, Any]:
        ran.append(message["orderId"])
        return {"counted": message["amount"]}

    handler = make_subscriber(count)
    record = sns_record({"orderId": "s-1", "amount": 12})
    assert handler(sns_event(record), lambda_context()) == {"processed": 1}
    assert handler(sns_event(record), lambda_context()) == {"duplicate": 1}
    assert ran == ["s-1"]


def test_a_sale_published_twice_is_counted_once_by_its_business_key(
    make_subscriber: MakeSubscriber,
) -> None:
    """The shop example: two publishes of one sale have two MessageIds."""
    ran: list[str] = []
    handler = make_subscriber(lambda m, c: ran.append(c.message_id))
    first = sns_record({"orderId": "s-2", "amount": 5})
    second = sns_record({"orderId": "s-2", "amount": 5})
    handler(sns_event(first))
    assert handler(sns_event(second)) == {"duplicate": 1}
    assert ran == [first["Sns"]["MessageId"]]


def test_the_default_key_is_the_sns_message_id(
    make_subscriber: MakeSubscriber, store: IdempotencyStore, scope: str
) -> None:
    record = sns_record("not even JSON", message_id="mid-7")
    handler = make_subscriber(lambda m, c: c.key, key=None, raw_body=True)
    handler(sns_event(record))
    stored = store.get(scope, "mid-7")
    assert stored is not None
    assert stored.result == "mid-7"


def test_a_key_in_a_message_attribute(make_subscriber: MakeSubscriber) -> None:
    ran: list[str] = []
    handler = make_subscriber(lambda m, c: ran.append(c.key), key="attribute:saleId")
    handler(sns_event(sns_record({"amount": 1}, attributes={"saleId": "a-1"})))
    handler(sns_event(sns_record({"amount": 1}, attributes={"saleId": "a-1"})))
    assert ran == ["a-1"]


def test_the_context_carries_the_topic(make_subscriber: MakeSubscriber) -> None:
    seen: list[NotificationContext] = []
    handler = make_subscriber(lambda m, c: seen.append(c))
    record = sns_record({"orderId": "t-1"}, subject="a sale")
    handler(sns_event(record))
    (ctx,) = seen
    assert isinstance(ctx, NotificationContext)
    assert (ctx.topic_arn, ctx.subject, ctx.published_at) == (
        TOPIC_ARN,
        "a sale",
        "2026-11-23T12:00:00.000Z",
    )
    assert ctx.message_id == record["Sns"]["MessageId"]
    assert ctx.record is record
    assert ctx.attempt == 1
    assert ctx.fence > 0


def test_a_failure_raises_after_the_failed_record_and_the_redelivery_runs_again(
    make_subscriber: MakeSubscriber, store: IdempotencyStore, scope: str
) -> None:
    attempts: list[int] = []

    def flaky(message: Any, ctx: NotificationContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("the warehouse did not answer")
        return "counted"

    handler = make_subscriber(flaky)
    record = sns_record({"orderId": "f-1"})
    with pytest.raises(DeliveryFailed) as raised:
        handler(sns_event(record))
    assert [r.outcome for r in raised.value.results] == [Outcome.FAILED]
    assert "ConnectionError" in str(raised.value)
    failed = store.get(scope, "f-1")  # written before the raise
    assert failed is not None
    assert failed.status is Status.FAILED
    assert failed.error is not None
    assert failed.error.retryable
    assert failed.error.type == "ConnectionError"
    assert handler(sns_event(record)) == {"processed": 1}  # Lambda's async retry
    assert attempts == [1, 2]
    done = store.get(scope, "f-1")
    assert done is not None
    assert (done.status, done.result) == (Status.COMPLETED, "counted")


def test_a_permanent_failure_goes_to_the_dlq_with_its_reason_and_succeeds(
    make_subscriber: MakeSubscriber, sqs: SQSClient, queues: Queues
) -> None:
    ran: list[str] = []

    def refuse(message: Any, ctx: NotificationContext) -> None:
        ran.append(ctx.key)
        raise PermanentError("amount is negative")

    handler = make_subscriber(refuse)
    record = sns_record({"orderId": "p-1", "amount": -1}, attributes={"channel": "web"})
    assert handler(sns_event(record)) == {"permanent": 1}
    (letter,) = drain(sqs, queues.dlq_url)
    attributes = letter["MessageAttributes"]
    assert attributes["eo-error-type"]["StringValue"] == "PermanentError"
    assert attributes["eo-error-message"]["StringValue"] == "amount is negative"
    assert attributes["eo-original-message-id"]["StringValue"] == record["Sns"]["MessageId"]
    assert attributes["channel"]["StringValue"] == "web"  # the SNS attribute, kept
    assert json.loads(letter["Body"]) == {"orderId": "p-1", "amount": -1}  # the Message
    # A redelivery of the same event does not run it again: the record is FAILED for good.
    assert handler(sns_event(record)) == {"permanent": 1}
    assert ran == ["p-1"]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("{not json", "NonJsonBody"),
        ({"amount": 1}, "MissingKey"),
        ("[" * 100_000 + "]" * 100_000, "NonJsonBody"),
    ],
)
def test_unusable_input_is_dead_lettered_without_running(
    make_subscriber: MakeSubscriber, sqs: SQSClient, queues: Queues, message: Any, reason: str
) -> None:
    ran: list[Any] = []
    handler = make_subscriber(lambda m, c: ran.append(m))
    assert handler(sns_event(sns_record(message))) == {"permanent": 1}
    (letter,) = drain(sqs, queues.dlq_url)
    assert letter["MessageAttributes"]["eo-error-type"]["StringValue"] == reason
    assert ran == []


def test_without_a_dlq_a_permanent_failure_is_raised_for_the_on_failure_destination(
    make_subscriber: MakeSubscriber,
) -> None:
    handler = make_subscriber(lambda m, c: None, dead_letter_queue_url="")
    with pytest.raises(DeliveryFailed, match="NonJsonBody"):
        handler(sns_event(sns_record("{not json")))


def test_work_in_progress_elsewhere_is_raised_without_running(
    make_subscriber: MakeSubscriber, store: IdempotencyStore, scope: str
) -> None:
    store.acquire(scope, "busy", lease_ms=60_000, owner="another invocation")
    ran: list[str] = []
    handler = make_subscriber(lambda m, c: ran.append(c.key))
    with pytest.raises(DeliveryFailed) as raised:
        handler(sns_event(sns_record({"orderId": "busy"})))
    assert [r.outcome for r in raised.value.results] == [Outcome.IN_PROGRESS]
    assert ran == []


def test_concurrent_deliveries_of_one_notification_run_it_once(
    make_subscriber: MakeSubscriber,
) -> None:
    """SNS may deliver the same message to two invocations at the same moment."""
    ran: list[str] = []
    gate = threading.Barrier(8)
    handler = make_subscriber(lambda m, c: ran.append(c.key))
    record = sns_record({"orderId": "race"})
    outcomes: list[str] = []

    def deliver() -> None:
        gate.wait()
        try:
            outcomes.append(next(iter(handler(sns_event(record)))))
        except DeliveryFailed:
            outcomes.append("raised")

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ran == ["race"]
    assert outcomes.count("processed") == 1
    assert set(outcomes) <= {"processed", "duplicate", "raised"}


def test_a_store_throttled_past_its_retries_is_raised_and_nothing_runs(
    make_subscriber: MakeSubscriber, dynamodb_local: DynamoDBLocal
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    throttles: list[str] = []
    install_throttling(client, 1.0, random.Random(7), throttles.append)
    ran: list[str] = []
    handler = make_subscriber(lambda m, c: ran.append(c.key), dynamodb_client=client)
    with pytest.raises(DeliveryFailed) as raised:
        handler(sns_event(sns_record({"orderId": "throttled"})))
    assert [r.outcome for r in raised.value.results] == [Outcome.ERROR]
    assert throttles == ["UpdateItem", "UpdateItem"]  # both of botocore's attempts
    assert ran == []


def test_a_lost_reply_on_completion_still_completes_once(
    make_subscriber: MakeSubscriber,
    dynamodb_local: DynamoDBLocal,
    store: IdempotencyStore,
    scope: str,
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    ran: list[str] = []

    def work(message: Any, ctx: NotificationContext) -> str:
        ran.append(ctx.key)
        install_lost_replies(client, lose_next("UpdateItem"), lost.append)
        return "done"

    lost: list[str] = []
    handler = make_subscriber(work, dynamodb_client=client)
    record = sns_record({"orderId": "lost-reply"})
    assert handler(sns_event(record)) == {"processed": 1}
    assert lost == ["UpdateItem"]
    assert handler(sns_event(record)) == {"duplicate": 1}
    stored = store.get(scope, "lost-reply")
    assert stored is not None
    assert stored.result == "done"
    assert stored.attempts == 1
    assert ran == ["lost-reply"]


def test_a_hostile_key_is_stored_hashed_and_still_runs_once(
    make_subscriber: MakeSubscriber, store: IdempotencyStore, scope: str
) -> None:
    key = "\ud800 lone surrogate"  # valid JSON ("\\ud800"), not valid UTF-8
    message = '{"orderId": "\\ud800 lone surrogate"}'
    ran: list[str] = []
    handler = make_subscriber(lambda m, c: ran.append(c.key))
    handler(sns_event(sns_record(message)))
    handler(sns_event(sns_record(message)))
    assert ran == [storable_key(key)]
    assert ran[0].startswith("sha256:")
    assert store.get(scope, storable_key(key)) is not None


def test_not_an_sns_event_returns_without_a_retry(make_subscriber: MakeSubscriber) -> None:
    handler = make_subscriber(lambda m, c: None)
    assert handler({"detail-type": "something else"}) == {}
    assert handler.last_results == []


def test_a_record_without_a_message_id_is_raised(make_subscriber: MakeSubscriber) -> None:
    record = sns_record({"orderId": "x"})
    del record["Sns"]["MessageId"]
    handler = make_subscriber(lambda m, c: None)
    with pytest.raises(DeliveryFailed, match="malformed record"):
        handler(sns_event(record))


def test_metrics_per_invocation_and_per_lock_event(
    make_subscriber: MakeSubscriber, scope: str, capsys: pytest.CaptureFixture[str]
) -> None:
    handler = make_subscriber(lambda m, c: None)
    capsys.readouterr()
    handler(sns_event(sns_record({"orderId": "m-1"})))
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    (outcomes,) = [doc for doc in emf if "subscriber" in doc]
    assert outcomes["subscriber"] == scope
    assert outcomes["Processed"] == [1.0]
    assert sorted(
        name
        for doc in emf
        if doc.get("scope") == scope
        for name in doc
        if name in ("Started", "Finished")
    ) == ["Finished", "Started"]


def test_scope_comes_from_subscriber_scope(
    monkeypatch: pytest.MonkeyPatch,
    ddb: Any,
    idempotency_table: str,
    store: IdempotencyStore,
) -> None:
    from exactly_once import sns_subscriber

    monkeypatch.setenv("IDEMPOTENCY_TABLE", idempotency_table)
    monkeypatch.setenv("SUBSCRIBER_SCOPE", "sales-from-env")
    handler = sns_subscriber(key="orderId", dynamodb_client=ddb)(lambda m, c: c.scope)
    handler(sns_event(sns_record({"orderId": "env-1"})))
    stored = store.get("sales-from-env", "env-1")
    assert stored is not None
    assert stored.result == "sales-from-env"
