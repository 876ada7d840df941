"""Fenced side effects: one ledger item per key under zombies, crashes and TTL expiry."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, Outcome, RecordContext
from exactly_once.effects import LeaseLost
from exactly_once.ledger import record_effect
from tests.consumer.conftest import (
    MakeConsumer,
    event,
    lambda_context,
    ledger_entries,
    sqs_record,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def test_effect_is_written_once_and_duplicates_write_nothing(
    ledger_consumer: MakeConsumer, ddb: DynamoDBClient, ledger_table: str
) -> None:
    handler = ledger_consumer(lambda body, ctx: record_effect(ctx, {"n": 1}, table=ledger_table))
    record = sqs_record({"id": "e-1"})
    handler(event(record, sqs_record({"id": "e-1"})), lambda_context())
    handler(event(record), lambda_context())
    [entry] = ledger_entries(ddb, ledger_table, "e-1")
    assert [r.outcome for r in handler.last_results] == [Outcome.DUPLICATE]
    assert entry["message_id"]["S"] == record["messageId"]


def test_a_zombies_effect_is_refused_and_its_message_retried(
    ledger_consumer: MakeConsumer,
    ddb: DynamoDBClient,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
) -> None:
    future = IdempotencyStore(idempotency_table, client=ddb, clock=lambda: time.time() + 3600)

    def frozen_then_resumed(body: Any, ctx: RecordContext) -> Any:
        # while this holder is frozen past its lease, another takes over and writes the effect
        newer = future.acquire(scope, ctx.key, lease_ms=60_000, owner="newer:req")
        assert newer.lock is not None
        newer_ctx = RecordContext(
            "m-new", ctx.key, newer.lock.fence, 2, {}, None, future, newer.lock
        )
        assert record_effect(newer_ctx, {"by": "newer"}, table=ledger_table) is not None
        return record_effect(ctx, {"by": "zombie"}, table=ledger_table)

    handler = ledger_consumer(frozen_then_resumed)
    record = sqs_record({"id": "e-2"})
    assert handler(event(record), lambda_context()) == {
        "batchItemFailures": [{"itemIdentifier": record["messageId"]}]
    }
    assert [r.outcome for r in handler.last_results] == [Outcome.LEASE_LOST]
    [entry] = ledger_entries(ddb, ledger_table, "e-2")
    assert entry["message_id"]["S"] == "m-new"  # the newer holder's, not the zombie's


def test_a_takeover_after_a_crash_between_effect_and_completion_skips_the_effect(
    ledger_consumer: MakeConsumer,
    ddb: DynamoDBClient,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb)
    crashed = store.acquire(scope, "e-3", lease_ms=-1, owner="crashed:req")  # lease already over
    assert crashed.lock is not None
    crashed_ctx = RecordContext(
        "m-old", "e-3", crashed.lock.fence, 1, {}, None, store, crashed.lock
    )
    assert record_effect(crashed_ctx, {"by": "crashed"}, table=ledger_table) is not None
    # ...and it died before completing. The redelivery takes over:
    written: list[str | None] = []
    handler = ledger_consumer(
        lambda b, c: written.append(record_effect(c, {"by": "b"}, table=ledger_table))
    )
    assert handler(event(sqs_record({"id": "e-3"})), lambda_context()) == {"batchItemFailures": []}
    assert written == [None]  # already applied by the crashed holder
    assert [r.takeover for r in handler.last_results] == [True]
    [entry] = ledger_entries(ddb, ledger_table, "e-3")
    assert entry["fence"]["N"] == str(crashed.lock.fence)


def test_a_retry_after_the_effect_does_not_repeat_it(
    ledger_consumer: MakeConsumer, ddb: DynamoDBClient, ledger_table: str
) -> None:
    def effect_then_fail(body: Any, ctx: RecordContext) -> None:
        record_effect(ctx, {"attempt": ctx.attempt}, table=ledger_table)
        if ctx.attempt == 1:
            raise TimeoutError("the reply was lost after the write")

    handler = ledger_consumer(effect_then_fail)
    record = sqs_record({"id": "e-4"})
    handler(event(record), lambda_context())
    assert handler(event(record), lambda_context()) == {"batchItemFailures": []}
    assert len(ledger_entries(ddb, ledger_table, "e-4")) == 1


def test_after_the_record_expires_the_effect_item_still_stops_a_second_effect(
    ddb: DynamoDBClient, idempotency_table: str, ledger_table: str, scope: str
) -> None:
    now = [time.time()]
    store = IdempotencyStore(idempotency_table, client=ddb, clock=lambda: now[0])
    first = store.acquire(scope, "e-5", lease_ms=60_000, owner="a")
    assert first.lock is not None
    ctx = RecordContext("m1", "e-5", first.lock.fence, 1, {}, None, store, first.lock)
    assert record_effect(ctx, {"run": 1}, table=ledger_table) is not None
    store.complete(first.lock, "done")
    now[0] += store.record_ttl_s + 1  # the record expired: the key is new again for the lock
    second = store.acquire(scope, "e-5", lease_ms=60_000, owner="b")
    assert second.lock is not None
    assert second.lock.fence > first.lock.fence
    ctx2 = RecordContext("m2", "e-5", second.lock.fence, 1, {}, None, store, second.lock)
    assert record_effect(ctx2, {"run": 2}, table=ledger_table) is None  # ...but not the effect
    assert len(ledger_entries(ddb, ledger_table, "e-5")) == 1
    # a differently named effect of the same key is its own item
    assert record_effect(ctx2, {"run": 2}, table=ledger_table, name="refund") is not None


def test_a_context_without_a_lock_cannot_write_an_effect(ledger_table: str) -> None:
    with pytest.raises(LeaseLost):
        record_effect(RecordContext("m", "k", 1, 1, {}), {}, table=ledger_table)
