"""The subscriber's writes under faults, with the clock under the test's control.

Each SNS delivery makes three writes: the acquire, the business function's fenced effect and
the completion (or the failure). For the completion: a throttle past botocore's retries, a
crash just before the write is sent and just after it is applied, the lease passing while the
function runs (a zombie), and the record's TTL passing. In every case the effect is applied
once, and the delivery raises exactly when Lambda must deliver it again. (A lost reply on the
completion and a throttle on the acquire: test_subscriber.py; the stateful model delivers
notifications among its rules too.)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import (
    DeliveryFailed,
    IdempotencyStore,
    NotificationContext,
    Outcome,
    SnsSubscriber,
    Status,
    sns_subscriber,
)
from exactly_once.effects import put_once
from exactly_once.sqs.processor import RecordProcessor
from fault_injection.throttling import install_throttling
from tests.conftest import FakeClock, make_ddb_client
from tests.consumer.conftest import Queues, lambda_context
from tests.sns.conftest import sns_event, sns_record

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from local_aws.dynamodb_local import DynamoDBLocal

TTL_S = 3600
PAST_THE_LEASE_S = 600  # the lease is the invocation's 30 s plus the 5 s margin


class Crash(BaseException):
    """The process dying at a chosen point: not an error any code means to handle."""


class Switch(random.Random):
    """Throttles every request while `on`."""

    on = False

    def random(self) -> float:
        return 0.0 if self.on else 1.0


@dataclass
class Rig:
    client: DynamoDBClient
    store: IdempotencyStore
    clock: FakeClock
    switch: Switch
    ledger: str
    scope: str
    applied: list[bool]

    def handler(
        self,
        after: Callable[[NotificationContext], None],
        before: Callable[[NotificationContext], None],
    ) -> Callable[[Any, NotificationContext], str]:
        """A function that applies one fenced effect per key, between `before` and `after`."""

        def handle(message: Any, ctx: NotificationContext) -> str:
            before(ctx)
            item = {"pk": {"S": ctx.key}, "sk": {"S": "sale"}}
            self.applied.append(put_once(ctx, self.ledger, item, key_names=("pk", "sk")))
            after(ctx)
            return f"counted at fence {ctx.fence}"

        return handle

    def deliver(self, subscriber: SnsSubscriber, record: dict[str, Any]) -> dict[str, int]:
        return subscriber(sns_event(record), lambda_context())


@pytest.fixture
def rig(
    dynamodb_local: DynamoDBLocal,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
    clock: FakeClock,
) -> Rig:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    switch = Switch()
    install_throttling(client, 1.0, switch)
    store = IdempotencyStore(
        idempotency_table, client=client, clock=clock, record_ttl_s=TTL_S, failed_ttl_s=TTL_S
    )
    return Rig(client, store, clock, switch, ledger_table, scope, [])


@pytest.fixture
def subscribe(
    rig: Rig, sqs: SQSClient, queues: Queues, idempotency_table: str
) -> Callable[..., SnsSubscriber]:
    """`sns_subscriber` as a Lambda would build it, on the rig's clocked store."""

    def build(
        after: Callable[[NotificationContext], None] = lambda ctx: None,
        before: Callable[[NotificationContext], None] = lambda ctx: None,
    ) -> SnsSubscriber:
        subscriber = sns_subscriber(
            key="orderId",
            table_name=idempotency_table,
            scope=rig.scope,
            dead_letter_queue_url=queues.dlq_url,
            dynamodb_client=rig.client,
            sqs_client=sqs,
        )(rig.handler(after, before))
        config = subscriber.processor().config
        # The same processor the subscriber builds, on a store whose clock the test moves.
        subscriber._processor = RecordProcessor(
            subscriber.handler,
            subscriber.key,
            config,
            rig.store,
            sqs,
            context_type=NotificationContext,
        )
        return subscriber

    return build


def status(rig: Rig, key: str) -> Status | None:
    record = rig.store.get(rig.scope, key)
    return record.status if record else None


def test_a_throttle_past_the_retries_on_completion_raises_and_the_effect_stays_single(
    rig: Rig, subscribe: Callable[..., SnsSubscriber]
) -> None:
    def throttle_from_now(ctx: NotificationContext) -> None:
        rig.switch.on = ctx.attempt == 1  # the completion (and its durable retries) fail

    subscriber = subscribe(throttle_from_now)
    record = sns_record({"orderId": "t-1"})
    with pytest.raises(DeliveryFailed) as raised:
        rig.deliver(subscriber, record)
    assert [r.outcome for r in raised.value.results] == [Outcome.ERROR]
    rig.switch.on = False
    assert status(rig, "t-1") is Status.IN_PROGRESS  # nothing was written
    with pytest.raises(DeliveryFailed) as again:  # Lambda's retry, within the lease
        rig.deliver(subscriber, record)
    assert [r.outcome for r in again.value.results] == [Outcome.IN_PROGRESS]
    rig.clock.advance(PAST_THE_LEASE_S)
    assert rig.deliver(subscriber, record) == {"processed": 1}  # taken over, run again
    assert rig.applied == [True, False]  # the fence found the effect already applied
    assert status(rig, "t-1") is Status.COMPLETED


@pytest.mark.parametrize("when", ["before-send", "after-call"])
def test_a_crash_at_the_completion_write_leaves_a_state_the_redelivery_finishes(
    rig: Rig, subscribe: Callable[..., SnsSubscriber], when: str
) -> None:
    """before-send: the process dies before the completion reaches DynamoDB; after-call: it
    dies once DynamoDB applied it, before the handler could return."""
    crashed: list[str] = []

    def crash(**_: Any) -> None:
        if not crashed:
            crashed.append(when)
            raise Crash(when)

    def arm(ctx: NotificationContext) -> None:
        if ctx.attempt == 1 and not crashed:
            rig.client.meta.events.register(f"{when}.dynamodb.UpdateItem", crash)

    subscriber = subscribe(arm)
    record = sns_record({"orderId": f"c-{when}"})
    with pytest.raises(DeliveryFailed):  # the invocation did not succeed: Lambda retries
        rig.deliver(subscriber, record)
    rig.client.meta.events.unregister(f"{when}.dynamodb.UpdateItem", crash)
    assert crashed == [when]
    if when == "before-send":
        assert status(rig, f"c-{when}") is Status.IN_PROGRESS
        rig.clock.advance(PAST_THE_LEASE_S)
        assert rig.deliver(subscriber, record) == {"processed": 1}
        assert rig.applied == [True, False]
    else:
        assert status(rig, f"c-{when}") is Status.COMPLETED
        assert rig.deliver(subscriber, record) == {"duplicate": 1}
        assert rig.applied == [True]


def test_a_zombie_past_its_lease_cannot_apply_or_complete_over_its_successor(
    rig: Rig, subscribe: Callable[..., SnsSubscriber]
) -> None:
    record = sns_record({"orderId": "z-1"})
    successor: list[dict[str, int]] = []

    def stall(ctx: NotificationContext) -> None:
        if ctx.attempt == 1:  # frozen past the lease before its effect; SNS delivers again
            rig.clock.advance(PAST_THE_LEASE_S)
            successor.append(rig.deliver(subscriber, record))

    subscriber = subscribe(before=stall)
    with pytest.raises(DeliveryFailed) as raised:
        rig.deliver(subscriber, record)
    assert successor == [{"processed": 1}]  # the takeover ran and completed
    assert [r.outcome for r in raised.value.results] == [Outcome.LEASE_LOST]
    assert rig.applied == [True]  # the zombie's effect was refused (LeaseLost), not applied
    stored = rig.store.get(rig.scope, "z-1")
    assert stored is not None
    assert stored.status is Status.COMPLETED
    assert stored.attempts == 2
    assert stored.result == f"counted at fence {stored.fence}"  # the successor's outcome


def test_after_the_record_ttl_a_redelivery_runs_but_the_effect_is_not_repeated(
    rig: Rig, subscribe: Callable[..., SnsSubscriber]
) -> None:
    subscriber = subscribe()
    record = sns_record({"orderId": "ttl-1"})
    assert rig.deliver(subscriber, record) == {"processed": 1}
    rig.clock.advance(TTL_S + 1)  # the dedup window is over (DynamoDB may not have deleted it)
    assert rig.deliver(subscriber, record) == {"processed": 1}
    assert rig.applied == [True, False]  # the fenced effect is once per key, ever
