"""The store at its edges: lost replies, throttles between steps, TTL against lease, deletion.

Faults are injected through botocore's event hooks on a client of the test's own, against
DynamoDB Local, so every case runs the real conditional-write semantics.
"""

from __future__ import annotations

import itertools
import random
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from exactly_once import (
    AcquireStatus,
    ErrorInfo,
    IdempotencyStore,
    RecordContext,
    Status,
    WriteStatus,
)
from exactly_once.effects import put_once
from exactly_once.ledger import record_effect
from exactly_once.stores import schema
from fault_injection.lost_replies import install_lost_replies, lose_next
from fault_injection.throttling import install_throttling
from tests.conftest import FakeClock, make_ddb_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

LEASE_MS = 30_000


def faulty_store(
    dynamodb_local: DynamoDBLocal, table: str, clock: FakeClock, **kwargs: Any
) -> tuple[IdempotencyStore, DynamoDBClient]:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=3)
    return IdempotencyStore(table, client=client, clock=clock, **kwargs), client


def item_of(ddb: DynamoDBClient, table: str, scope: str, key: str) -> dict[str, Any]:
    got = ddb.get_item(
        TableName=table, Key={"id": {"S": schema.record_id(scope, key)}}, ConsistentRead=True
    )
    return dict(got.get("Item", {}))


def effect_item(key: str) -> dict[str, Any]:
    return {"pk": {"S": key}, "sk": {"S": "effect"}}


def context(store: IdempotencyStore, key: str, lock: Any) -> RecordContext:
    return RecordContext(f"m-{lock.fence}", key, lock.fence, lock.attempt, {}, None, store, lock)


class _AllButFirst(random.Random):
    """Throttle draws: let the first request through, throttle every one after it."""

    def __init__(self) -> None:
        super().__init__(0)
        self.seen = 0

    def random(self) -> float:
        self.seen += 1
        return 0.99 if self.seen == 1 else 0.0


# -- 1. a new effect after TTL expiry is never skipped because of a stale mark ---------------


def test_a_throttle_while_renewing_an_expired_record_never_skips_the_next_effect(
    dynamodb_local: DynamoDBLocal,
    ddb: DynamoDBClient,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
    clock: FakeClock,
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock, record_ttl_s=3600)
    first = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="gen1")
    assert first.lock is not None
    assert put_once(context(store, "k", first.lock), ledger_table, effect_item("k"))
    # ...the holder died before completing. The effect item is consumed downstream (an outbox),
    # and the record outlives its TTL without being swept yet.
    ddb.delete_item(TableName=ledger_table, Key={"pk": {"S": "k"}, "sk": {"S": "effect"}})
    clock.advance(3600 + 60)

    faulty, client = faulty_store(dynamodb_local, idempotency_table, clock, record_ttl_s=3600)
    install_throttling(client, 0.5, _AllButFirst())
    with pytest.raises(ClientError):  # every write after the first request is throttled
        faulty.acquire(scope, "k", lease_ms=LEASE_MS, owner="gen2")

    clock.advance(LEASE_MS / 1000 + 1)  # whatever that left behind, its lease is over
    again = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="gen2-retry")
    assert again.lock is not None
    assert put_once(context(store, "k", again.lock), ledger_table, effect_item("k")) is True


def test_a_renewed_record_starts_a_new_generation_in_one_write(
    ddb: DynamoDBClient, idempotency_table: str, ledger_table: str, scope: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock, record_ttl_s=3600)
    first = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="gen1")
    assert first.lock is not None
    assert put_once(context(store, "k", first.lock), ledger_table, effect_item("k"))
    clock.advance(3600 + 60)
    second = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="gen2")
    assert second.lock is not None
    assert second.lock.fence > first.lock.fence
    item = item_of(ddb, idempotency_table, scope, "k")
    assert not [n for n in item if n.startswith(schema.EFFECT_FENCE)]  # gone with its generation
    assert int(item[schema.ATTEMPTS]["N"]) == 1


# -- 4. a retried write recognises its own success ----------------------------------------


def test_a_lost_acquire_reply_is_recognised_as_our_own_lock(
    dynamodb_local: DynamoDBLocal, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    store, client = faulty_store(dynamodb_local, idempotency_table, clock)
    lost: list[str] = []
    install_lost_replies(client, lose_next("UpdateItem"), lost.append)
    got = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="payer", block_takeover=True)
    assert lost == ["UpdateItem"]
    assert got.status is AcquireStatus.ACQUIRED
    assert got.lock is not None
    assert store.complete(got.lock, {"paid": True}).ok


def test_a_lost_complete_reply_is_not_reported_as_lease_lost(
    dynamodb_local: DynamoDBLocal, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    store, client = faulty_store(dynamodb_local, idempotency_table, clock)
    lock = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="a").lock
    assert lock is not None
    install_lost_replies(client, lose_next("UpdateItem"))
    assert store.complete(lock, 42).ok
    record = store.get(scope, "k")
    assert record is not None
    assert record.status is Status.COMPLETED
    assert record.result == 42


def test_a_lost_fail_reply_is_not_reported_as_lease_lost(
    dynamodb_local: DynamoDBLocal, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    store, client = faulty_store(dynamodb_local, idempotency_table, clock)
    lock = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="a").lock
    assert lock is not None
    install_lost_replies(client, lose_next("UpdateItem"))
    assert store.fail(lock, ErrorInfo("Boom", "no", retryable=False)).ok
    record = store.get(scope, "k")
    assert record is not None
    assert record.status is Status.FAILED


def test_a_lost_effect_reply_counts_as_written_by_us(
    dynamodb_local: DynamoDBLocal,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
    clock: FakeClock,
) -> None:
    store, client = faulty_store(dynamodb_local, idempotency_table, clock)
    lock = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="a").lock
    assert lock is not None
    install_lost_replies(client, lose_next("TransactWriteItems"))
    assert put_once(context(store, "k", lock), ledger_table, effect_item("k")) is True


# -- 5. the TTL never steals a live lease -------------------------------------------------


def assert_ttl_outlives_the_lease_then_holds(
    store: IdempotencyStore,
    ddb: DynamoDBClient,
    clock: FakeClock,
    scope: str,
    lock: Any,
    after_s: float,
) -> None:
    """The record's TTL lies past the lease, and `after_s` later (past now + the record TTL,
    inside the lease) nobody else can take the key."""
    item = item_of(ddb, store.table_name, scope, "k")
    assert int(item[schema.TTL]["N"]) * 1000 > lock.lease_expires_at_ms
    clock.advance(after_s)
    assert store.acquire(scope, "k", lease_ms=1000, owner="thief").status is (
        AcquireStatus.IN_PROGRESS
    )


def test_a_ttl_shorter_than_the_lease_cannot_steal_a_live_lock(
    ddb: DynamoDBClient, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock, record_ttl_s=60)
    holder = store.acquire(scope, "k", lease_ms=300_000, owner="slow")
    assert holder.lock is not None
    assert_ttl_outlives_the_lease_then_holds(store, ddb, clock, scope, holder.lock, after_s=120)


def test_extend_keeps_the_ttl_beyond_the_new_lease(
    ddb: DynamoDBClient, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock, record_ttl_s=60)
    lock = store.acquire(scope, "k", lease_ms=10_000, owner="slow").lock
    assert lock is not None
    extended = store.extend(lock, 600_000)
    assert extended.ok
    assert extended.lock is not None
    assert_ttl_outlives_the_lease_then_holds(store, ddb, clock, scope, extended.lock, after_s=300)


# -- 10. the fence keeps increasing after the TTL sweep deletes the item ------------------


def test_the_fence_increases_across_deletion(
    ddb: DynamoDBClient, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock, record_ttl_s=3600)
    seen: list[int] = []
    for _ in range(3):
        for _ in range(3):
            got = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="x")
            assert got.lock is not None
            seen.append(got.lock.fence)
            assert store.release(got.lock).ok
        ddb.delete_item(
            TableName=idempotency_table, Key={"id": {"S": schema.record_id(scope, "k")}}
        )  # the TTL sweep, days later
        clock.advance(3600 + 1)
    assert all(a < b for a, b in itertools.pairwise(seen)), seen


def test_a_record_swept_while_it_is_renewed_is_simply_acquired(
    dynamodb_local: DynamoDBLocal,
    ddb: DynamoDBClient,
    idempotency_table: str,
    scope: str,
    clock: FakeClock,
) -> None:
    store, client = faulty_store(dynamodb_local, idempotency_table, clock, record_ttl_s=3600)
    lock = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="gen1").lock
    assert lock is not None
    assert store.complete(lock, "done").ok
    clock.advance(2 * 3600)

    def sweep_first(**_: Any) -> None:  # the TTL sweep lands between the refusal and the Put
        ddb.delete_item(
            TableName=idempotency_table, Key={"id": {"S": schema.record_id(scope, "k")}}
        )

    client.meta.events.register_first("before-send.dynamodb.PutItem", sweep_first)
    got = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="gen2")
    assert got.status is AcquireStatus.ACQUIRED
    assert got.lock is not None
    assert got.lock.fence > lock.fence


def test_a_blocked_holders_late_fail_is_lease_lost_not_its_own_write(
    ddb: DynamoDBClient, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock)
    zombie = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="zombie").lock
    assert zombie is not None
    clock.advance(LEASE_MS / 1000 + 1)
    blocked = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="next", block_takeover=True)
    assert blocked.status is AcquireStatus.FAILED_PERMANENTLY
    assert store.fail(zombie, ErrorInfo("Late", "zombie", retryable=True)).status is (
        WriteStatus.LEASE_LOST
    )
    assert store.release(zombie).status is WriteStatus.LEASE_LOST
    record = store.get(scope, "k")
    assert record is not None
    assert record.error is not None
    assert record.error.type == "LeaseExpired"


def test_blocking_holds_after_the_ttl_too(
    ddb: DynamoDBClient, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock, record_ttl_s=60)
    assert store.acquire(scope, "k", lease_ms=LEASE_MS, owner="died").acquired
    clock.advance(600)  # past the lease and the TTL: nobody looked in between
    got = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="next", block_takeover=True)
    assert got.status is AcquireStatus.FAILED_PERMANENTLY


def test_one_holder_applies_several_named_effects_and_a_takeover_finishes_them(
    ddb: DynamoDBClient, idempotency_table: str, ledger_table: str, scope: str, clock: FakeClock
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock)
    first = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="a").lock
    assert first is not None
    ctx = context(store, "k", first)
    assert record_effect(ctx, {"n": 1}, table=ledger_table, name="charge") is not None
    # ...it died before its second effect. The takeover repeats neither, and finishes the job:
    clock.advance(LEASE_MS / 1000 + 1)
    second = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="b").lock
    assert second is not None
    again = context(store, "k", second)
    assert record_effect(again, {"n": 1}, table=ledger_table, name="charge") is None
    assert record_effect(again, {"n": 2}, table=ledger_table, name="email") is not None
    items = ddb.query(
        TableName=ledger_table,
        KeyConditionExpression="pk = :k",
        ExpressionAttributeValues={":k": {"S": "k"}},
    )["Items"]
    assert sorted(i["sk"]["S"] for i in items) == [f"{scope}#charge", f"{scope}#email"]
