"""Steps behind every entry point, on both stores: each step's effect is committed exactly once.

The business function is entry_support's three steps (charge, ship, email), each calling the
provider with its step key and making a durable effect with its recovery point (a row in
`step.transaction` on PostgreSQL, a `step.put` item on DynamoDB). Each entry point is driven as
its source drives it: an SQS batch and its redelivery, an SNS notification and Lambda's retry,
a Kinesis batch and its retry from the checkpoint, an HTTP request with an Idempotency-Key
through the local gateway and a real client, and `once` run again by its caller. What each
delivery ends as is read from what the entry point answers (its outcome, its dead letter, its
status code), not assumed.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from exactly_once import DeliveryFailed, PermanentError, begin, once, sns_subscriber, sqs_consumer
from exactly_once.context import LockedContext
from exactly_once.outcomes import Outcome
from exactly_once.steps.step import Step
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status
from exactly_once.streams import stream_consumer
from tests.api.conftest import MakeApi, make_api
from tests.conftest import FakeClock
from tests.consumer.conftest import drain, lambda_context, make_queues, sqs_record
from tests.sns.conftest import sns_record
from tests.steps.entry_support import (
    STEPS,
    Books,
    DynamoBooks,
    Faults,
    PostgresBooks,
    once_each,
    three_steps,
)
from tests.streams.stream_events import kinesis_record, records_event

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from tests.stores.conftest import StoreFactory

__all__ = ["make_api"]  # the API tests' fixture, used here

ENTRY_POINTS = ("sqs", "sns", "stream", "http", "once")
Work = Callable[[LockedContext, str], Any]


@pytest.fixture(autouse=True)
def _store_from_the_test_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("IDEMPOTENCY_TABLE", "IDEMPOTENCY_DSN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def books(backend: str, request: pytest.FixtureRequest) -> Iterator[Books]:
    """The step effects' books on the backend under test (see entry_support)."""
    if backend == "postgres":
        yield PostgresBooks(request.getfixturevalue("pg_dsn")).create()
        return
    yield DynamoBooks(request.getfixturevalue("ddb"), request.getfixturevalue("ledger_table"))


@pytest.fixture
def store_options(backend: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """How an entry point is configured with the backend, as its own tests configure it."""
    if backend == "postgres":
        return {"dsn": request.getfixturevalue("pg_dsn"), "table_name": None}
    return {
        "table_name": request.getfixturevalue("idempotency_table"),
        "dynamodb_client": request.getfixturevalue("ddb"),
    }


@pytest.fixture
def reader(make_store: StoreFactory) -> Store:
    """The store, on the real clock, for reading the records the entry points wrote."""
    return make_store(clock=time.time)


class Delivered:
    """What one delivery ended as, in the entry point's own terms."""

    def __init__(self, verdict: str, detail: str = "") -> None:
        # "done", "retry", "dead" (permanent), "final" (HTTP: a 500 saying a retry will not run
        # it) or "duplicate"
        self.verdict = verdict
        self.detail = detail  # the dead letter's error type, or the HTTP problem type

    def __repr__(self) -> str:
        return f"Delivered({self.verdict!r}, {self.detail!r})"


class Driver(ABC):
    """One entry point around a business function `work(ctx, order_id)`; `deliver` sends an
    order (again: a redelivery of the same message / request / record)."""

    permanent_is_final = True  # a PermanentError fails the key for good

    @abstractmethod
    def deliver(self, order_id: str) -> Delivered: ...

    @abstractmethod
    def use_store(self, store: Store) -> None:
        """Run on `store` (one on the test's clock) instead of the one configured."""


class RecordDriver(Driver, ABC):
    """SQS, SNS and streams: the record processor's outcome, and the DLQ's letters."""

    def __init__(self, handler: Any, sqs: SQSClient, dlq_url: str) -> None:
        self.handler = handler
        self.sqs = sqs
        self.dlq_url = dlq_url
        self.events: dict[str, dict[str, Any]] = {}

    @abstractmethod
    def event_for(self, order_id: str) -> dict[str, Any]: ...

    def use_store(self, store: Store) -> None:
        self.handler.processor().store = store

    def deliver(self, order_id: str) -> Delivered:
        event = self.events.setdefault(order_id, self.event_for(order_id))
        with contextlib.suppress(DeliveryFailed):  # SNS: asks Lambda to deliver it again
            self.handler(event, lambda_context())
        (result,) = self.handler.last_results
        if result.outcome is Outcome.PROCESSED:
            return Delivered("done")
        if result.outcome is Outcome.DUPLICATE:
            return Delivered("duplicate")
        if result.outcome is Outcome.PERMANENT:
            (letter,) = drain(self.sqs, self.dlq_url)
            kind = letter["MessageAttributes"]["eo-error-type"]["StringValue"]
            return Delivered("dead", kind)
        assert result.report_failure, result
        return Delivered("retry", result.outcome.value)


class SqsDriver(RecordDriver):
    def event_for(self, order_id: str) -> dict[str, Any]:
        return {"Records": [sqs_record({"orderId": order_id})]}


class SnsDriver(RecordDriver):
    def event_for(self, order_id: str) -> dict[str, Any]:
        return {"Records": [sns_record({"orderId": order_id})]}


class StreamDriver(RecordDriver):
    def event_for(self, order_id: str) -> dict[str, Any]:
        return records_event(kinesis_record({"orderId": order_id}, len(self.events)))


class HttpDriver(Driver):
    """The API through the local gateway; the order id is also the Idempotency-Key."""

    permanent_is_final = False  # docs/http.md: a raise is a 500, kept FAILED and retryable

    def __init__(self, make: MakeApi, work: Work, options: dict[str, Any]) -> None:
        def handler(request: Any, ctx: Any) -> dict[str, Any]:
            done = work(ctx, request.json()["orderId"])
            return {"statusCode": 201, "body": json.dumps(done)}

        self.served = make(handler, **options)

    def use_store(self, store: Store) -> None:
        config, _ = self.served.api.configured()
        self.served.api._store = (config, store)

    def deliver(self, order_id: str) -> Delivered:
        reply = self.served.post({"orderId": order_id}, order_id)
        if reply.status == 201:
            return Delivered("duplicate" if reply.replayed else "done")
        problem = str(reply.json()["type"]).rsplit(":", 1)[-1]
        if problem == "outcome-unknown":  # FAILED for good: an operator resets the key
            return Delivered("dead", problem)
        if problem == "handler-failed" and "will not run it again" in reply.json()["detail"]:
            return Delivered("final", problem)  # a 500 that says a retry will not run it
        return Delivered("retry" if reply.status in (500, 503, 409) else "dead", problem)


class OnceDriver(Driver):
    """`once` run again by its caller after it raised."""

    def __init__(self, work: Work, store: Store, scope: str) -> None:
        self.work = work
        self.store = store
        self.scope = scope

    def use_store(self, store: Store) -> None:
        self.store = store

    def deliver(self, order_id: str) -> Delivered:
        try:
            with once(self.scope, order_id, store=self.store, lease_s=60) as claim:
                if claim.acquired:
                    self.work(claim.lock, order_id)
        except PermanentError as exc:
            return Delivered("dead", type(exc).__name__)
        except Exception as exc:
            return Delivered("retry", type(exc).__name__)
        if claim.acquired:
            return Delivered("done")
        assert claim.status.name in ("COMPLETED", "FAILED"), claim.status
        return Delivered("duplicate" if claim.status.name == "COMPLETED" else "dead", "FAILED")


@pytest.fixture(params=ENTRY_POINTS)
def entry(request: pytest.FixtureRequest) -> str:
    return str(request.param)


MakeDriver = Callable[[Work], Driver]


@pytest.fixture
def driver(
    entry: str,
    store_options: dict[str, Any],
    scope: str,
    sqs: SQSClient,
    reader: Store,
    request: pytest.FixtureRequest,
) -> MakeDriver:
    """The entry point under test around a business function."""

    def make(work: Work) -> Driver:
        def handler(body: Any, ctx: Any) -> Any:
            return work(ctx, body["orderId"])

        if entry == "http":
            return HttpDriver(request.getfixturevalue("make_api"), work, store_options)
        if entry == "once":
            return OnceDriver(work, reader, scope)
        dlq = make_queues(sqs).dlq_url
        common = {
            "key": "orderId",
            "scope": scope,
            "fingerprint": False,
            "dead_letter_queue_url": dlq,
            "sqs_client": sqs,
            **store_options,
        }
        if entry == "sqs":
            return SqsDriver(sqs_consumer(**common)(handler), sqs, dlq)
        if entry == "sns":
            return SnsDriver(sns_subscriber(**common)(handler), sqs, dlq)
        return StreamDriver(stream_consumer(**common)(handler), sqs, dlq)

    return make


def order() -> str:
    return f"o-{uuid.uuid4().hex[:10]}"


def test_a_retry_after_a_failure_after_step_two_runs_only_step_three(
    driver: MakeDriver, books: Books
) -> None:
    faults = Faults(after_ship=TimeoutError("the shipping API timed out after shipping"))
    deliver = driver(lambda ctx, oid: three_steps(books, ctx, oid, faults))
    oid = order()

    first = deliver.deliver(oid)
    assert first.verdict == "retry", first
    assert books.effects(oid) == Counter({"charge": 1, "ship": 1})

    second = deliver.deliver(oid)
    assert second.verdict == "done", second
    assert once_each(books.effects(oid)), books.effects(oid)
    calls = books.provider_calls(oid)
    assert sorted(step for step, _ in calls) == sorted(STEPS)  # each called the provider once

    assert deliver.deliver(oid).verdict == "duplicate"
    assert once_each(books.effects(oid))


def test_a_permanent_failure_mid_steps_keeps_the_finished_steps_once(
    driver: MakeDriver, books: Books
) -> None:
    faults = Faults(after_ship=PermanentError("the address cannot be delivered to"))
    deliver = driver(lambda ctx, oid: three_steps(books, ctx, oid, faults))
    oid = order()

    first = deliver.deliver(oid)
    if deliver.permanent_is_final:
        assert (first.verdict, first.detail) == ("dead", "PermanentError"), first
    else:  # HTTP: docs/http.md's "the handler raised": 500 handler-failed, kept retryable
        assert (first.verdict, first.detail) == ("retry", "handler-failed"), first
    assert books.effects(oid) == Counter({"charge": 1, "ship": 1})

    again = deliver.deliver(oid)
    if deliver.permanent_is_final:
        assert again.verdict == "dead", again  # FAILED for good: nothing runs
        assert books.effects(oid) == Counter({"charge": 1, "ship": 1})
    else:  # the client's retry resumes after ship
        assert again.verdict == "done", again
        assert once_each(books.effects(oid))


def test_a_step_order_error_fails_the_key_as_a_permanent_error_does(
    driver: MakeDriver, books: Books
) -> None:
    """The code changed its steps while a key was in flight: the retry calls email where the
    key's recovery point says ship finished. Nothing more runs, and the key is FAILED for a
    person to look at (HTTP too, though other raises keep an HTTP key retryable)."""
    faults = Faults(after_ship=TimeoutError("died after shipping"))
    version = {"names": STEPS}
    deliver = driver(lambda ctx, oid: three_steps(books, ctx, oid, faults, version["names"]))
    oid = order()
    assert deliver.deliver(oid).verdict == "retry"

    version["names"] = ("charge", "email", "ship")  # the new code's order
    changed = deliver.deliver(oid)
    again = deliver.deliver(oid)
    if deliver.permanent_is_final:
        assert (changed.verdict, changed.detail) == ("dead", "StepOrderError"), changed
        assert again.verdict == "dead", again
    else:  # HTTP: a 500 (the exception's text is never sent), and the key FAILED for good
        assert (changed.verdict, changed.detail) == ("final", "handler-failed"), changed
        assert (again.verdict, again.detail) == ("dead", "outcome-unknown"), again
    assert books.effects(oid) == Counter({"charge": 1, "ship": 1})
    assert [step for step, _ in books.provider_calls(oid)] == ["charge", "ship"]


def test_a_step_whose_result_cannot_be_kept_fails_permanently(
    driver: MakeDriver, books: Books
) -> None:
    """StepResultUnstorable: the step's provider call happened, but its write went with the
    point that could not be kept, so neither committed; the key fails for good rather than run
    the step again (HTTP too: a 500, then 409 outcome-unknown, until an operator resets it)."""

    def work(ctx: LockedContext, oid: str) -> object:
        def charge(step: Step) -> object:
            books.call_provider(oid, "charge", step.idempotency_key)
            books.record(step, oid)
            return object()  # no codec keeps it

        return ctx.step("charge", charge)

    deliver = driver(work)
    oid = order()
    first = deliver.deliver(oid)
    again = deliver.deliver(oid)
    if deliver.permanent_is_final:
        assert (first.verdict, first.detail) == ("dead", "StepResultUnstorable"), first
        assert again.verdict == "dead", again
        assert len(books.provider_calls(oid)) == 1
    else:  # HTTP: a 500, and the key FAILED for good: its retry must not run the step again
        assert (first.verdict, first.detail) == ("final", "handler-failed"), first
        assert (again.verdict, again.detail) == ("dead", "outcome-unknown"), again
    assert len(books.provider_calls(oid)) == 1
    assert books.effects(oid) == Counter()


@pytest.mark.parametrize("backend", ["dynamodb"])  # step.write is DynamoDB's
def test_a_step_write_refused_by_its_condition_fails_the_key_with_nothing_written(
    driver: MakeDriver, books: Books, ddb: DynamoDBClient, ledger_table: str
) -> None:
    """StepWriteRefused: ship's second write is conditioned on an item not existing, and it
    exists; the transaction writes neither ship's items nor its point, and the key fails for
    good (HTTP too: a 500, then 409 outcome-unknown)."""
    oid = order()
    taken = {"pk": {"S": f"shipment#{oid}"}, "sk": {"S": "label"}}
    ddb.put_item(TableName=ledger_table, Item=taken)

    def work(ctx: LockedContext, order_id: str) -> object:
        ctx.step("charge", lambda s: books.record(s, order_id))

        def ship(step: Step) -> str:
            books.record(step, order_id)
            step.put(ledger_table, taken, new_only=("pk", "sk"))
            return "shipped"

        return ctx.step("ship", ship)

    deliver = driver(work)
    first = deliver.deliver(oid)
    if deliver.permanent_is_final:
        assert (first.verdict, first.detail) == ("dead", "StepWriteRefused"), first
    else:  # HTTP: a 500, and the key FAILED for good (docs/steps.md)
        assert (first.verdict, first.detail) == ("final", "handler-failed"), first
        assert deliver.deliver(oid).detail == "outcome-unknown"
    assert books.effects(oid) == Counter({"charge": 1})


def test_steps_then_gathered_completions_in_one_batch(
    monkeypatch: pytest.MonkeyPatch,
    store_options: dict[str, Any],
    scope: str,
    sqs: SQSClient,
    books: Books,
    reader: Store,
) -> None:
    """A batch of five orders: each runs its steps, then the wave's completions are written
    together (sqs/gathering.py). One order fails after ship; its redelivery, in a batch with
    two new orders, runs only its email."""
    faults: dict[str, Faults] = {}

    def handler(body: Any, ctx: Any) -> dict[str, str]:
        oid = body["orderId"]
        return three_steps(books, ctx, oid, faults.get(oid))

    consumer = sqs_consumer(
        key="orderId", scope=scope, fingerprint=False, sqs_client=sqs, **store_options
    )(handler)
    store = consumer.processor().store
    written = store.finish_many
    gathered: list[int] = []  # the completions of each `finish_many` (one per wave)

    def finish_many(finishes: Any) -> Any:
        gathered.append(len(finishes))
        return written(finishes)

    monkeypatch.setattr(store, "finish_many", finish_many)
    orders = [order() for _ in range(5)]
    faults[orders[2]] = Faults(after_ship=TimeoutError("lost the shipping reply"))
    records = {oid: sqs_record({"orderId": oid}) for oid in orders}
    response = consumer({"Records": list(records.values())}, lambda_context())
    assert response == {"batchItemFailures": [{"itemIdentifier": records[orders[2]]["messageId"]}]}
    outcomes = [r.outcome for r in consumer.last_results]
    assert sorted(outcomes) == sorted([Outcome.PROCESSED] * 4 + [Outcome.FAILED])
    assert gathered == [4]  # the four finished orders' completions, written together

    late = [order(), order()]
    batch = [records[orders[2]], *(sqs_record({"orderId": oid}) for oid in late)]
    assert consumer({"Records": batch}, lambda_context()) == {"batchItemFailures": []}
    assert gathered == [4, 3]
    for oid in [*orders, *late]:
        assert once_each(books.effects(oid)), (oid, books.effects(oid))
        record = reader.get(scope, oid)
        assert record is not None
        assert record.status is Status.COMPLETED
        assert sorted(record.result) == sorted(STEPS)
        assert [p.name for _, p in sorted(record.steps.items())] == list(STEPS)


def test_a_zombie_step_after_a_takeover_is_refused_and_the_redelivery_resumes(
    driver: MakeDriver, make_store: StoreFactory, books: Books
) -> None:
    """The holder's lease ends after charge and a newer holder takes the key (then dies in
    turn); the zombie's ship, write and all, is refused with LeaseLost, and the entry point
    reports a lost lease without writing an outcome. The redelivery, after the newer holder's
    lease, takes the key over and runs only ship and email."""
    clock = FakeClock(time.time())
    store = make_store(clock=clock)
    holders: list[LockedContext] = []
    successors: list[Any] = []

    def work(ctx: LockedContext, oid: str) -> dict[str, str]:
        holders.append(ctx)
        return three_steps(books, ctx, oid, faults)

    def take_over() -> None:
        clock.advance(600)  # the entry point's lease has ended
        ctx = holders[-1]
        successors.append(begin(ctx.scope, ctx.key, store=store, lease_s=60).lock)

    faults = Faults(after_charge=take_over)
    deliver = driver(work)
    deliver.use_store(store)  # the test's clock decides when leases end
    oid = order()

    zombie = deliver.deliver(oid)
    assert zombie.verdict == "retry", zombie
    assert zombie.detail in ("lease_lost", "lease-lost", "LeaseLost"), zombie
    assert books.effects(oid) == Counter({"charge": 1})
    (newer,) = successors
    assert newer.fence > holders[0].fence
    record = store.get(holders[0].scope, holders[0].key)
    assert record is not None
    assert (record.status, record.fence) == (Status.IN_PROGRESS, newer.fence)

    clock.advance(600)  # the newer holder died too
    resumed = deliver.deliver(oid)
    assert resumed.verdict == "done", resumed
    assert holders[-1].fence > newer.fence
    assert once_each(books.effects(oid)), books.effects(oid)
    # The zombie's ship called the provider before its write was refused: with the same step
    # key as the resumed ship's call, so the provider acts once.
    calls = books.provider_calls(oid)
    assert [step for step, _ in calls] == ["charge", "email", "ship", "ship"]
    assert len({key for step, key in calls if step == "ship"}) == 1


@pytest.mark.parametrize("backend", ["postgres"])  # a step's own transaction is PostgreSQL's
def test_a_step_commit_that_fails_leaves_the_key_retryable_without_its_writes(
    entry: str, driver: MakeDriver, request: pytest.FixtureRequest
) -> None:
    """PostgreSQL: ship's row breaks a deferred unique check, so its step's COMMIT fails
    (CommitFailed): neither its row nor its point committed, the entry point keeps the key
    retryable, and the retry (once the conflicting row is gone) runs ship and email once."""
    dsn = request.getfixturevalue("pg_dsn")
    table = f"shipments_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (order_id text UNIQUE DEFERRABLE INITIALLY DEFERRED)")
    oid = order()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {table} VALUES (%s)", (oid,))  # noqa: S608
    books = PostgresBooks(dsn).create()
    ships: list[str] = []

    def work(ctx: LockedContext, order_id: str) -> Any:
        def ship(step: Any) -> str:
            ships.append(step.idempotency_key)
            books.record(step, order_id)
            step.transaction.execute(f"INSERT INTO {table} VALUES (%s)", (order_id,))  # noqa: S608
            return "shipped"

        ctx.step("charge", lambda s: books.record(s, order_id))
        ctx.step("ship", ship)
        return ctx.step("email", lambda s: books.record(s, order_id))

    deliver = driver(work)
    first = deliver.deliver(oid)
    assert first.verdict == "retry", first
    if entry == "once":
        assert first.detail == "CommitFailed"
    if entry == "http":  # the handler raised: not the completion's 503 not-committed, since
        assert first.detail == "handler-failed"  # the steps before it did commit
    assert books.effects(oid) == Counter({"charge": 1})  # ship's row rolled back with its point
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {table}")  # noqa: S608
    assert deliver.deliver(oid).verdict == "done"
    assert once_each(books.effects(oid))
    assert ships == [ships[0], ships[0]]  # run twice, with the same step key
