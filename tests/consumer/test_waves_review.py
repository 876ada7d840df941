"""The wave path held to what the per-record path promised: found by a review of issue 27's
batch path (a FIFO group stopped by a failure its completion reported, an interrupted batch,
a store whose batched acquire raises whole). DynamoDB Local and moto's SQS, no timing."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest

from exactly_once import LeasePolicy, Outcome, RecordContext, SqsConsumer
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.records import AcquireRequest, AcquireStatus, Acquisition
from exactly_once.stores.schema import Status
from tests.consumer.conftest import event, lambda_context, sqs_record
from tests.consumer.test_waves import build, client, fifo, store, uid

__all__ = ["build", "client", "store", "uid"]  # the fixtures this module shares


def test_a_fifo_record_whose_gathered_completion_fails_stops_its_group_in_later_waves(
    build: Any, store: IdempotencyStore, scope: str, uid: str
) -> None:
    """The group's first record ran as a zombie (its key taken over meanwhile): its gathered
    completion comes back LEASE_LOST and it is redelivered. The group's later records, held to
    the next wave by a repeated key, must not run after it (the per-record path stopped the
    group at once): they are skipped, in order."""
    ran: list[str] = []

    def overtaken(body: Any, ctx: RecordContext) -> None:
        ran.append(body["n"])
        if body["n"] == "1":  # another holder takes the key over meanwhile
            past = IdempotencyStore(store.table_name, client=store.client, clock=lambda: 10**10)
            past.acquire(scope, body["id"], lease_ms=60_000, owner="next")

    handler: SqsConsumer = build(overtaken)
    records = [
        fifo({"id": f"{uid}-a", "n": "1"}, "g"),
        fifo({"id": f"{uid}-a", "n": "2"}, "g"),  # the same key: the next wave, and the group
        fifo({"id": f"{uid}-c", "n": "3"}, "g"),
    ]
    handler(event(*records), lambda_context())
    assert [r.outcome for r in handler.last_results] == [
        Outcome.LEASE_LOST,
        Outcome.SKIPPED,
        Outcome.SKIPPED,
    ]
    assert ran == ["1"]
    assert store.get(scope, f"{uid}-c") is None  # never claimed


def test_an_interrupted_batch_still_writes_the_completions_of_the_records_that_ran(
    build: Any, store: IdempotencyStore, scope: str, uid: str
) -> None:
    """A KeyboardInterrupt in a handler goes on to the caller, as before batching; the record
    that ran before it is COMPLETED (not left IN_PROGRESS to run again once its lease ends),
    and the key claimed for a record that never ran is released."""

    def pay(body: Any, ctx: RecordContext) -> None:
        if body["id"].endswith("-2"):
            raise KeyboardInterrupt

    handler: SqsConsumer = build(pay, concurrency=1)
    records = [sqs_record({"id": f"{uid}-{n}"}) for n in (1, 2, 3)]
    with pytest.raises(KeyboardInterrupt):
        handler(event(*records), lambda_context())
    done = store.get(scope, f"{uid}-1")
    assert done is not None
    assert done.status is Status.COMPLETED
    for key in (f"{uid}-2", f"{uid}-3"):  # failed by its run; released, never run
        left = store.get(scope, key)
        assert left is not None
        assert left.status is Status.FAILED
        assert left.error is not None
        assert left.error.retryable


class _RaisingStore(IdempotencyStore):
    """A store whose batched acquire fails as a whole (a store's own defect, an unforeseen
    reply): the per-record path caught its acquire's error per record."""

    def acquire_many(self, requests: Sequence[AcquireRequest]) -> list[Acquisition | Exception]:
        raise RuntimeError("the batch could not be read")


def test_a_batched_acquire_that_raises_whole_is_reported_per_record_not_raised(
    build: Any, store: IdempotencyStore, uid: str
) -> None:
    """The consumer never raises (a raised error retries the whole batch and makes Lambda
    back off): every record is reported for redelivery and none ran."""
    ran: list[str] = []
    handler: SqsConsumer = build(lambda body, ctx: ran.append(body["id"]))
    handler.processor().store = _RaisingStore(store.table_name, client=store.client)
    records = [sqs_record({"id": f"{uid}-{n}"}) for n in range(3)]
    response = handler(event(*records), lambda_context())
    assert response == {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records]}
    assert {r.outcome for r in handler.last_results} == {Outcome.ERROR}
    assert ran == []


def test_a_record_whose_lease_ends_before_the_invocation_completes_at_once_not_gathered(
    build: Any, store: IdempotencyStore, scope: str, uid: str
) -> None:
    """A lease capped below the invocation (LeasePolicy.max_ms, no heartbeat) covers each
    record's own work, not the wave's slowest record: a completion gathered behind a slower
    record could outlive it, and a duplicate delivery would then take the key over and run
    the work again. So such a record completes as it finishes, as on the per-record path.
    The slower record's handler stands in for that duplicate delivery, with a clock past the
    first record's lease (no waiting)."""
    later: list[Any] = []

    def pay(body: Any, ctx: RecordContext) -> None:
        if body["id"].endswith("-slow"):
            past = IdempotencyStore(  # past the 10 s lease, within the record's TTL
                store.table_name, client=store.client, clock=lambda: time.time() + 60
            )
            later.append(past.acquire(scope, f"{uid}-quick", lease_ms=60_000, owner="dup"))

    handler: SqsConsumer = build(
        pay, concurrency=1, lease=LeasePolicy(max_ms=10_000, heartbeat_ms=None)
    )
    records = [sqs_record({"id": f"{uid}-quick"}), sqs_record({"id": f"{uid}-slow"})]
    assert handler(event(*records), lambda_context(timeout_ms=60_000)) == {"batchItemFailures": []}
    assert later[0].status is AcquireStatus.ALREADY_COMPLETED  # not taken over and run again
    assert [r.outcome for r in handler.last_results] == [Outcome.PROCESSED, Outcome.PROCESSED]
