"""The batch path's round trips and what it frees: one request claims a wave's keys, one more
writes their outcomes, and a lock whose record never ran is released in that request.

Counted on the wire (a botocore hook on the consumer's own client), never timed.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Outcome, RecordContext, SqsConsumer, sqs_consumer
from exactly_once.sqs import gathering, waves
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.schema import Status
from tests.conftest import make_ddb_client
from tests.consumer.conftest import Queues, event, lambda_context, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

FIFO_ARN = "arn:aws:sqs:us-east-1:123456789012:payments.fifo"


class Wire:
    """The DynamoDB requests a client sent, by operation."""

    def __init__(self, client: DynamoDBClient) -> None:
        self.sent: list[str] = []
        self._guard = threading.Lock()
        client.meta.events.register("before-send.dynamodb", self._record)

    def _record(self, request: Any, **_: Any) -> None:
        operation = request.headers.get("X-Amz-Target", b"")
        name = operation.decode() if isinstance(operation, bytes) else str(operation)
        with self._guard:
            self.sent.append(name.rsplit(".", 1)[-1])

    def take(self) -> Counter[str]:
        with self._guard:
            counted, self.sent = Counter(self.sent), []
        return counted


@pytest.fixture
def client(dynamodb_local: Any) -> DynamoDBClient:
    return make_ddb_client(dynamodb_local.endpoint)


@pytest.fixture
def wire(client: DynamoDBClient) -> Wire:
    return Wire(client)


@pytest.fixture
def build(
    client: DynamoDBClient, sqs: SQSClient, idempotency_table: str, scope: str, queues: Queues
) -> Callable[..., SqsConsumer]:
    def make(fn: Callable[[Any, RecordContext], Any], **kwargs: Any) -> SqsConsumer:
        kwargs.setdefault("key", "id")
        return sqs_consumer(
            table_name=idempotency_table,
            scope=scope,
            dead_letter_queue_url=queues.dlq_url,
            dynamodb_client=client,
            sqs_client=sqs,
            **kwargs,
        )(fn)

    return make


@pytest.fixture
def store(client: DynamoDBClient, idempotency_table: str) -> IdempotencyStore:
    return IdempotencyStore(idempotency_table, client=client)


def redelivered(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "attributes": {**record["attributes"], "ApproximateReceiveCount": "2"}}


def fifo(body: dict[str, Any], group: str) -> dict[str, Any]:
    return sqs_record(body, arn=FIFO_ARN, group_id=group)


def test_a_batch_of_ten_new_records_takes_two_requests_and_its_duplicates_one(
    build: Callable[..., SqsConsumer], wire: Wire, uid: str
) -> None:
    ran: list[str] = []
    handler = build(lambda body, ctx: ran.append(body["id"]))
    records = [sqs_record({"id": f"{uid}-{n}"}) for n in range(10)]
    wire.take()

    assert handler(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert wire.take() == {"BatchExecuteStatement": 2}
    assert sorted(ran) == sorted(f"{uid}-{n}" for n in range(10))

    again = [redelivered(r) for r in records]  # SQS redelivers: the key is likely taken
    assert handler(event(*again), lambda_context()) == {"batchItemFailures": []}
    assert wire.take() == {"BatchExecuteStatement": 1}
    assert {r.outcome for r in handler.last_results} == {Outcome.DUPLICATE}
    assert len(ran) == 10


def test_more_records_than_a_wave_take_two_requests_a_wave(
    build: Callable[..., SqsConsumer], wire: Wire, uid: str
) -> None:
    handler = build(lambda body, ctx: None)
    records = [sqs_record({"id": f"{uid}-{n}"}) for n in range(waves.WAVE + 5)]
    wire.take()
    assert handler(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert wire.take() == {"BatchExecuteStatement": 4}
    assert {r.outcome for r in handler.last_results} == {Outcome.PROCESSED}


def test_a_key_twice_in_one_batch_runs_once_and_the_second_is_a_duplicate(
    build: Callable[..., SqsConsumer], uid: str
) -> None:
    """The second record waits for the next wave, so it meets COMPLETED, not the batch's own
    lock (which would hide it as in progress and burn a receive)."""
    ran: list[str] = []
    handler = build(lambda body, ctx: ran.append(body["id"]))
    records = [sqs_record({"id": f"{uid}-a"}), sqs_record({"id": f"{uid}-b"})]
    records.append(sqs_record({"id": f"{uid}-a"}))
    assert handler(event(*records), lambda_context()) == {"batchItemFailures": []}
    assert [r.outcome for r in handler.last_results] == [
        Outcome.PROCESSED,
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
    ]
    assert sorted(ran) == [f"{uid}-a", f"{uid}-b"]


def test_a_stopped_fifo_group_frees_the_keys_it_never_ran_at_once(
    build: Callable[..., SqsConsumer], store: IdempotencyStore, scope: str, uid: str
) -> None:
    """The skipped records' keys were claimed with the wave; they are released in the
    completion request (retryable FAILED), so their redelivery runs now, not after a lease."""
    ran: list[str] = []

    def pay(body: Any, ctx: RecordContext) -> None:
        ran.append(body["id"])
        if body.get("fail") and ctx.attempt == 1:
            raise RuntimeError("declined for now")

    records = [
        fifo({"id": f"{uid}-1"}, "g"),
        fifo({"id": f"{uid}-2", "fail": True}, "g"),
        fifo({"id": f"{uid}-3"}, "g"),
        fifo({"id": f"{uid}-4"}, "g"),
    ]
    handler = build(pay)
    handler(event(*records), lambda_context())
    assert [r.outcome for r in handler.last_results] == [
        Outcome.PROCESSED,
        Outcome.FAILED,
        Outcome.SKIPPED,
        Outcome.SKIPPED,
    ]
    for skipped in (f"{uid}-3", f"{uid}-4"):
        record = store.get(scope, skipped)
        assert record is not None
        assert record.status is Status.FAILED
        assert record.error is not None
        assert record.error.retryable
        assert record.error.type == "Released"

    ran.clear()
    again = [redelivered(r) for r in records[1:]]
    assert handler(event(*again), lambda_context()) == {"batchItemFailures": []}
    assert ran == [f"{uid}-2", f"{uid}-3", f"{uid}-4"]


def test_without_the_release_the_skipped_keys_wait_for_their_lease(
    build: Callable[..., SqsConsumer],
    store: IdempotencyStore,
    scope: str,
    uid: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check above fails when the release is left out: the keys stay IN_PROGRESS."""
    monkeypatch.setattr(gathering.Gathering, "release", lambda self, lock, reason: None)

    def pay(body: Any, ctx: RecordContext) -> None:
        if body.get("fail"):
            raise RuntimeError("declined for now")

    records = [fifo({"id": f"{uid}-1", "fail": True}, "g"), fifo({"id": f"{uid}-2"}, "g")]
    build(pay)(event(*records), lambda_context())
    record = store.get(scope, f"{uid}-2")
    assert record is not None
    assert record.status is Status.IN_PROGRESS


def test_a_gathered_completion_refused_to_a_zombie_reports_the_record_failed(
    build: Callable[..., SqsConsumer], store: IdempotencyStore, scope: str, uid: str
) -> None:
    """A holder whose key was taken over while it ran: its gathered completion is refused
    in the batch's request, the record is LEASE_LOST (redelivered), and the new holder's
    record is untouched."""
    successor: list[Any] = []

    def overtaken(body: Any, ctx: RecordContext) -> None:
        if body["id"].endswith("-z"):  # another holder takes the key over meanwhile
            past = IdempotencyStore(store.table_name, client=store.client, clock=lambda: 10**10)
            successor.append(past.acquire(scope, body["id"], lease_ms=60_000, owner="next"))

    handler = build(overtaken)
    records = [sqs_record({"id": f"{uid}-ok"}), sqs_record({"id": f"{uid}-z"})]
    response = handler(event(*records), lambda_context())
    assert response == {"batchItemFailures": [{"itemIdentifier": records[1]["messageId"]}]}
    assert [r.outcome for r in handler.last_results] == [Outcome.PROCESSED, Outcome.LEASE_LOST]
    held = store.get(scope, f"{uid}-z")
    assert held is not None
    assert held.status is Status.IN_PROGRESS
    assert held.lock_token == successor[0].lock.token


def test_a_record_deferred_at_the_deadline_frees_its_claimed_key(
    build: Callable[..., SqsConsumer], store: IdempotencyStore, scope: str, uid: str
) -> None:
    """The first record uses up the time; the second was claimed with the wave but is not
    started, so its key is released in the completion request, not left to the lease."""
    clock = {"left": 60_000}

    class Context:
        function_name = "f"
        aws_request_id = "r"

        def get_remaining_time_in_millis(self) -> int:
            return clock["left"]

    def slow(body: Any, ctx: RecordContext) -> None:
        clock["left"] = 100  # past the margin now

    handler = build(slow, concurrency=1)
    records = [sqs_record({"id": f"{uid}-1"}), sqs_record({"id": f"{uid}-2"})]
    handler(event(*records), Context())
    assert [r.outcome for r in handler.last_results] == [Outcome.PROCESSED, Outcome.DEFERRED]
    record = store.get(scope, f"{uid}-2")
    assert record is not None
    assert record.status is Status.FAILED
    assert record.error is not None
    assert record.error.type == "Released"


@pytest.fixture
def uid() -> str:
    import uuid

    return uuid.uuid4().hex[:10]
