"""Each row of the outcome table, end to end through the decorated handler."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import (
    AcquireStatus,
    ErrorInfo,
    IdempotencyStore,
    Outcome,
    PermanentError,
    RecordContext,
    SqsConsumer,
    Status,
    sqs_consumer,
)
from tests.consumer.conftest import (
    MakeConsumer,
    Queues,
    drain,
    event,
    lambda_context,
    received_record,
    sqs_record,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


@pytest.fixture
def calls() -> list[Any]:
    return []


def recording(calls: list[Any], result: Any = "ok") -> Callable[[Any, RecordContext], Any]:
    def fn(body: Any, ctx: RecordContext) -> Any:
        calls.append((body, ctx.key, ctx.attempt))
        return result

    return fn


def first_attempt_raises(
    error: Exception, result: str, attempts: list[int]
) -> Callable[[Any, RecordContext], str]:
    """A business function that raises on attempt 1 and returns `result` afterwards."""

    def fn(body: Any, ctx: RecordContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise error
        return result

    return fn


def outcomes(consumer: SqsConsumer) -> list[Outcome]:
    return [r.outcome for r in consumer.last_results]


def test_new_record_runs_and_completes(
    make_consumer: MakeConsumer, calls: list[Any], store: IdempotencyStore, scope: str
) -> None:
    handler = make_consumer(recording(calls, {"charged": 5}))
    response = handler(event(sqs_record({"orderId": "o-1", "amount": 5})), lambda_context())
    assert response == {"batchItemFailures": []}
    assert calls == [({"orderId": "o-1", "amount": 5}, "o-1", 1)]
    record = store.get(scope, "o-1")
    assert record is not None
    assert record.status is Status.COMPLETED
    assert record.result == {"charged": 5}
    assert record.owner is not None
    assert record.owner.startswith("test-consumer:")


def test_completed_duplicate_runs_nothing(make_consumer: MakeConsumer, calls: list[Any]) -> None:
    handler = make_consumer(recording(calls))
    body = {"orderId": "o-2"}
    handler(event(sqs_record(body)), lambda_context())
    response = handler(event(sqs_record(body)), lambda_context())  # a new messageId
    assert response == {"batchItemFailures": []}
    assert len(calls) == 1
    assert outcomes(handler) == [Outcome.DUPLICATE]


def test_in_progress_duplicate_is_retried_later_and_hidden_until_the_lease_ends(
    make_consumer: MakeConsumer,
    calls: list[Any],
    store: IdempotencyStore,
    scope: str,
    sqs: SQSClient,
    queues: Queues,
) -> None:
    store.acquire(scope, "o-3", lease_ms=60_000, owner="other:req", fingerprint=None)
    record = received_record(sqs, queues, {"orderId": "o-3"})
    handler = make_consumer(recording(calls), fingerprint=False)
    response = handler(event(record), lambda_context())
    assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert calls == []
    assert outcomes(handler) == [Outcome.IN_PROGRESS]
    # the queue's own visibility timeout is 1 s; the handler extended it to the lease's end
    time.sleep(1.3)
    assert (
        sqs.receive_message(QueueUrl=queues.source_url, WaitTimeSeconds=0).get("Messages") is None
    )


def test_business_exception_fails_retryably_then_succeeds(
    make_consumer: MakeConsumer, store: IdempotencyStore, scope: str
) -> None:
    attempts: list[int] = []
    flaky = first_attempt_raises(TimeoutError("downstream timed out"), "lucky", attempts)
    handler = make_consumer(flaky)
    record = sqs_record({"orderId": "o-4"})
    first = handler(event(record), lambda_context())
    assert first == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    failed = store.get(scope, "o-4")
    assert failed is not None
    assert failed.status is Status.FAILED
    assert failed.error == ErrorInfo("TimeoutError", "downstream timed out", retryable=True)

    second = handler(event(record), lambda_context())
    assert second == {"batchItemFailures": []}
    assert attempts == [1, 2]
    done = store.get(scope, "o-4")
    assert done is not None
    assert done.status is Status.COMPLETED
    assert done.attempts == 2


def dlq_attributes(message: dict[str, Any]) -> dict[str, str]:
    return {k: v["StringValue"] for k, v in message.get("MessageAttributes", {}).items()}


def test_permanent_error_goes_straight_to_the_dlq_with_its_reason(
    make_consumer: MakeConsumer,
    store: IdempotencyStore,
    scope: str,
    sqs: SQSClient,
    queues: Queues,
) -> None:
    def reject(body: Any, ctx: RecordContext) -> None:
        raise PermanentError("card declined")

    handler = make_consumer(reject)
    record = sqs_record({"orderId": "o-5"}, attributes={"tenant": "acme"})
    assert handler(event(record), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(handler) == [Outcome.PERMANENT]
    stored = store.get(scope, "o-5")
    assert stored is not None
    assert stored.status is Status.FAILED
    assert stored.error == ErrorInfo("PermanentError", "card declined", retryable=False)

    [message] = drain(sqs, queues.dlq_url)
    assert json.loads(message["Body"]) == {"orderId": "o-5"}
    assert dlq_attributes(message) == {
        "tenant": "acme",
        "eo-error-type": "PermanentError",
        "eo-error-message": "card declined",
        "eo-consumer": scope,
        "eo-original-message-id": record["messageId"],
        "eo-attempt": "1",
        "eo-replay-nonce": stored.replay_nonce,  # only a replay of this copy may re-run it
    }
    assert stored.replay_nonce is not None
    # a redelivered copy is dead-lettered again rather than run
    assert handler(event(record), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(handler) == [Outcome.PERMANENT]


def test_replay_from_the_dlq_runs_a_permanent_failure_again(
    make_consumer: MakeConsumer, sqs: SQSClient, queues: Queues
) -> None:
    ran: list[int] = []
    handler = make_consumer(first_attempt_raises(PermanentError("bad data"), "fixed", ran))
    handler(event(sqs_record({"orderId": "o-6"})), lambda_context())
    [dead] = drain(sqs, queues.dlq_url)
    replayed = sqs_record(json.loads(dead["Body"]), attributes=dlq_attributes(dead))
    assert handler(event(replayed), lambda_context()) == {"batchItemFailures": []}
    assert outcomes(handler) == [Outcome.PROCESSED]
    assert ran == [1, 2]


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        ("this is not json", "NonJsonBody"),
        ({"customer": "no order id"}, "MissingKey"),
        ([1, 2, 3], "MissingKey"),
        ({"orderId": {"nested": "object"}}, "MissingKey"),
    ],
)
def test_unusable_messages_are_dead_lettered_without_running(
    make_consumer: MakeConsumer,
    calls: list[Any],
    sqs: SQSClient,
    queues: Queues,
    body: Any,
    error_type: str,
) -> None:
    handler = make_consumer(recording(calls))
    record = sqs_record(body)
    assert handler(event(record), lambda_context()) == {"batchItemFailures": []}
    assert calls == []
    [message] = drain(sqs, queues.dlq_url)
    assert message["Body"] == record["body"]
    assert dlq_attributes(message)["eo-error-type"] == error_type


def test_raw_bodies_are_accepted_when_the_consumer_opts_in(
    make_consumer: MakeConsumer, calls: list[Any]
) -> None:
    handler = make_consumer(recording(calls), key=None, raw_body=True)
    record = sqs_record("plain,text,line")
    assert handler(event(record), lambda_context()) == {"batchItemFailures": []}
    assert calls == [("plain,text,line", record["messageId"], 1)]


def test_fingerprint_mismatch_is_dead_lettered(
    make_consumer: MakeConsumer, calls: list[Any], sqs: SQSClient, queues: Queues
) -> None:
    handler = make_consumer(recording(calls))
    handler(event(sqs_record({"orderId": "o-7", "amount": 1})), lambda_context())
    response = handler(event(sqs_record({"orderId": "o-7", "amount": 999})), lambda_context())
    assert response == {"batchItemFailures": []}
    assert outcomes(handler) == [Outcome.PERMANENT]
    assert len(calls) == 1
    [message] = drain(sqs, queues.dlq_url)
    assert dlq_attributes(message)["eo-error-type"] == "FingerprintMismatch"


def test_fingerprint_fields_limit_what_counts_as_the_same_payload(
    make_consumer: MakeConsumer, calls: list[Any]
) -> None:
    handler = make_consumer(recording(calls), fingerprint_fields=["amount"])
    handler(event(sqs_record({"orderId": "o-8", "amount": 1, "sentAt": 1})), lambda_context())
    handler(event(sqs_record({"orderId": "o-8", "amount": 1, "sentAt": 2})), lambda_context())
    assert outcomes(handler) == [Outcome.DUPLICATE]
    assert len(calls) == 1


def test_blocked_expired_lock_is_failed_for_a_person_and_dead_lettered(
    make_consumer: MakeConsumer,
    calls: list[Any],
    store: IdempotencyStore,
    scope: str,
    sqs: SQSClient,
    queues: Queues,
) -> None:
    store.acquire(scope, "o-9", lease_ms=-1, owner="dead:req")  # a holder that died
    handler = make_consumer(recording(calls), block_takeover=True, fingerprint=False)
    assert handler(event(sqs_record({"orderId": "o-9"})), lambda_context()) == {
        "batchItemFailures": []
    }
    assert calls == []
    stored = store.get(scope, "o-9")
    assert stored is not None
    assert stored.status is Status.FAILED
    assert stored.error is not None
    assert stored.error.type == "LeaseExpired"
    [message] = drain(sqs, queues.dlq_url)
    assert dlq_attributes(message)["eo-error-type"] == "LeaseExpired"


def test_expired_lock_is_taken_over_by_default(
    make_consumer: MakeConsumer, calls: list[Any], store: IdempotencyStore, scope: str
) -> None:
    store.acquire(scope, "o-10", lease_ms=-1, owner="dead:req")
    handler = make_consumer(recording(calls), fingerprint=False)
    assert handler(event(sqs_record({"orderId": "o-10"})), lambda_context()) == {
        "batchItemFailures": []
    }
    assert calls == [({"orderId": "o-10"}, "o-10", 2)]
    assert [r.takeover for r in handler.last_results] == [True]


def test_permanent_failure_without_a_dlq_is_reported_failed_not_dropped(
    make_consumer: MakeConsumer, calls: list[Any]
) -> None:
    handler = make_consumer(recording(calls), dead_letter_queue_url="")
    record = sqs_record("not json")
    assert handler(event(record), lambda_context()) == {
        "batchItemFailures": [{"itemIdentifier": record["messageId"]}]
    }


def test_failed_dlq_send_is_reported_failed(
    make_consumer: MakeConsumer, calls: list[Any], moto_endpoint: str
) -> None:
    missing = f"{moto_endpoint}/123456789012/no-such-queue"
    handler = make_consumer(recording(calls), dead_letter_queue_url=missing)
    record = sqs_record("not json")
    assert handler(event(record), lambda_context()) == {
        "batchItemFailures": [{"itemIdentifier": record["messageId"]}]
    }
    [result] = handler.last_results
    assert result.outcome is Outcome.ERROR
    assert result.reason is not None
    assert "DLQ send" in result.reason


def test_lease_lost_at_completion_keeps_the_other_holders_record_and_retries(
    make_consumer: MakeConsumer,
    ddb: DynamoDBClient,
    idempotency_table: str,
    store: IdempotencyStore,
    scope: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    future = IdempotencyStore(idempotency_table, client=ddb, clock=lambda: time.time() + 3600)

    def slow_zombie(body: Any, ctx: RecordContext) -> str:
        # while this invocation works, its lease "expires" and another holder finishes
        other = future.acquire(scope, ctx.key, lease_ms=60_000, owner="other:req")
        assert other.status is AcquireStatus.ACQUIRED
        assert other.lock is not None
        future.complete(other.lock, "the other holder's result")
        return "zombie result"

    handler = make_consumer(slow_zombie, fingerprint=False)
    record = sqs_record({"orderId": "o-11"})
    # reported failed: the redelivery then meets the other holder's outcome (a duplicate here)
    assert handler(event(record), lambda_context()) == {
        "batchItemFailures": [{"itemIdentifier": record["messageId"]}]
    }
    assert outcomes(handler) == [Outcome.LEASE_LOST]
    stored = future.get(scope, "o-11")
    assert stored is not None
    assert stored.result == "the other holder's result"
    assert stored.attempts == 2
    assert any(
        r.levelname == "ERROR" and "LEASE LOST at completion" in r.getMessage()
        for r in caplog.records
    )
    assert '"LeaseLost"' in capsys.readouterr().out  # the EMF metric


def test_throttled_store_reports_the_record_failed(
    make_consumer: MakeConsumer,
    calls: list[Any],
    dynamodb_local: Any,
    sqs: SQSClient,
    idempotency_table: str,
    scope: str,
) -> None:
    from tests.conftest import make_ddb_client
    from tests.store.test_concurrency_and_errors import _throttle_every_request

    throttled = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    _throttle_every_request(throttled, [])
    handler = sqs_consumer(
        key="orderId",
        table_name=idempotency_table,
        scope=scope,
        dynamodb_client=throttled,
        sqs_client=sqs,
    )(recording(calls))
    record = sqs_record({"orderId": "o-12"})
    assert handler(event(record), lambda_context()) == {
        "batchItemFailures": [{"itemIdentifier": record["messageId"]}]
    }
    assert calls == []
    assert outcomes(handler) == [Outcome.ERROR]


def test_long_work_extends_its_lease_and_a_lost_lease_says_so(
    make_consumer: MakeConsumer, store: IdempotencyStore, scope: str
) -> None:
    seen: list[bool] = []

    def long_job(body: Any, ctx: RecordContext) -> str:
        before = store.get(scope, ctx.key)
        seen.append(ctx.extend_lease(600_000))
        after = store.get(scope, ctx.key)
        assert before is not None
        assert after is not None
        assert after.lease_expires_at_ms is not None
        assert before.lease_expires_at_ms is not None
        seen.append(after.lease_expires_at_ms > before.lease_expires_at_ms + 60_000)
        return "done"

    handler = make_consumer(long_job, fingerprint=False)
    assert handler(event(sqs_record({"orderId": "o-13"})), lambda_context()) == {
        "batchItemFailures": []
    }
    assert seen == [True, True]
    assert RecordContext("m", "k", 1, 1, {}).extend_lease(1_000) is False  # no lock: nothing held
