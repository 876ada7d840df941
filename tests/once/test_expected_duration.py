"""`expected_duration_s` is stored on the record (`expected_by`) for a monitor of slow work,
and an acquisition without it sends exactly the request it always sent: the queue path's
chaos results and the model test rest on that request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import ErrorInfo, IdempotencyStore, Status, StoredRecord, begin
from exactly_once.stores import schema
from tests.conftest import FakeClock, make_ddb_client
from tests.once.conftest import MARGIN_MS, raw_item

if TYPE_CHECKING:
    from local_aws.dynamodb_local import DynamoDBLocal

# The acquisition request as it was before `expected_by` existed (git 3d1f4f6, store.py).
UPDATE = (
    "SET #st = :ip, #tok = :tok, #lease = :lease, #own = :own, #upd = :now_ms, "
    "#crt = if_not_exists(#crt, :now_ms), #exp = :ttl, #ps = :shard, #pa = :lease, "
    "#fence = if_not_exists(#fence, :now_ms) + :one "
    # `#rid` since durable resumes (durable.py): a takeover must clear an earlier holder's id
    "ADD #att :one REMOVE #res, #rsha, #rsize, #romit, #err, #nonce, #rid"
)
CONDITION = (
    "attribute_not_exists(#id) OR #exp >= :now_s AND #st = :ip AND #lease < :now_ms "
    "OR #exp >= :now_s AND #st = :failed AND #err.#retry = :true"
)
NAMES = [
    "#id", "#st", "#exp", "#lease", "#tok", "#fence", "#att", "#own", "#crt", "#upd", "#res",
    "#rsha", "#rsize", "#romit", "#err", "#ps", "#pa", "#retry", "#nonce", "#rid",
]  # fmt: skip
VALUES = [
    ":ip", ":tok", ":lease", ":own", ":now_ms", ":now_s", ":ttl", ":shard", ":one", ":failed",
    ":true",
]  # fmt: skip
RENEWED = [
    "id", "status", "lock_token", "lease_expires_at", "owner", "created_at", "updated_at",
    "expires_at", "pending_shard", "pending_at", "fence", "attempts",
]  # fmt: skip


class Sent:
    """The parameters of every request a client sends, by operation, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls.append((model.name, params))

    def of(self, operation: str) -> list[dict[str, Any]]:
        return [params for name, params in self.calls if name == operation]


@pytest.fixture
def sent(
    dynamodb_local: DynamoDBLocal, idempotency_table: str, clock: FakeClock
) -> tuple[IdempotencyStore, Sent]:
    client = make_ddb_client(dynamodb_local.endpoint)
    seen = Sent()
    client.meta.events.register("provide-client-params.dynamodb", seen)
    return IdempotencyStore(idempotency_table, client=client, clock=clock, record_ttl_s=60), seen


def without_token(params: dict[str, Any]) -> dict[str, Any]:
    """The request with its random lock token masked: everything else is the clock's."""
    values = dict(params["ExpressionAttributeValues"])
    values[":tok"] = {"S": "<token>"}
    return {**params, "ExpressionAttributeValues": values}


def test_without_an_expected_duration_acquire_sends_the_request_it_always_sent(
    sent: tuple[IdempotencyStore, Sent], scope: str, clock: FakeClock
) -> None:
    store, seen = sent
    first = store.acquire(scope, "k", lease_ms=30_000, owner="o").lock
    assert first is not None
    assert schema.EXPECTED_BY not in raw_item(store, scope, "k")
    assert store.fail(first, ErrorInfo("Retry", "again", retryable=True)).ok
    store.acquire(scope, "k", lease_ms=30_000, owner="o", expected_duration_ms=20_000)
    plain, timed = seen.of("UpdateItem")[0], seen.of("UpdateItem")[2]
    assert plain["UpdateExpression"] == UPDATE
    assert plain["ConditionExpression"] == CONDITION
    assert list(plain["ExpressionAttributeNames"]) == NAMES  # botocore keeps the order
    assert list(plain["ExpressionAttributeValues"]) == VALUES

    # With it, at the same clock reading: one more SET clause, its name and its value.
    assert timed["UpdateExpression"] == UPDATE.replace(" ADD", ", #xby = :xby ADD")
    names = dict(timed["ExpressionAttributeNames"])
    assert names.pop("#xby") == schema.EXPECTED_BY
    values = dict(timed["ExpressionAttributeValues"])
    assert values.pop(":xby") == {"N": str(int(clock.now * 1000) + 20_000)}
    stripped = {
        **timed,
        "UpdateExpression": UPDATE,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    assert without_token(stripped) == without_token(plain)
    assert list(values) == VALUES
    assert int(raw_item(store, scope, "k")[schema.EXPECTED_BY]["N"]) == clock.now * 1000 + 20_000


def test_renewing_an_expired_record_writes_expected_by_only_when_given(
    sent: tuple[IdempotencyStore, Sent], scope: str, clock: FakeClock
) -> None:
    store, seen = sent
    for key in ("plain", "timed"):
        lock = store.acquire(scope, key, lease_ms=1_000, owner="o").lock
        assert lock is not None
        assert store.complete(lock, "old").ok
    clock.advance(3_600)  # past the record TTL: the next acquisition replaces the item whole
    assert store.acquire(scope, "plain", lease_ms=30_000, owner="o").acquired
    got = store.acquire(scope, "timed", lease_ms=30_000, owner="o", expected_duration_ms=9_000)
    assert got.acquired
    plain, timed = seen.of("PutItem")
    assert list(plain["Item"]) == RENEWED
    assert list(timed["Item"]) == [*RENEWED, schema.EXPECTED_BY]
    assert timed["Item"][schema.EXPECTED_BY] == {"N": str(int(clock.now * 1000) + 9_000)}
    assert int(raw_item(store, scope, "timed")[schema.EXPECTED_BY]["N"]) == clock.now * 1000 + 9_000


def test_begin_stores_the_expected_completion_and_the_record_reads_it(
    store: IdempotencyStore, scope: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEASE_HEARTBEAT", "off")  # the long lease held whole, on a fake clock
    claim = begin(scope, "k", expected_duration_s=90, store=store)
    now_ms = int(clock.now * 1000)
    record = store.get(scope, "k")
    assert record is not None
    assert record.expected_by_ms == now_ms + 90_000
    assert record.lease_expires_at_ms == now_ms + 90_000 + MARGIN_MS
    assert claim.lock.lease_ends_at * 1000 == record.lease_expires_at_ms
    assert not record.overdue(now_ms + 90_000)
    assert record.overdue(now_ms + 90_001)


def test_a_later_attempt_without_an_expected_duration_replaces_the_earlier_one(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    begin(scope, "k", expected_duration_s=5, store=store).lock.fail("try again")
    begin(scope, "k", lease_s=600, store=store)
    record = store.get(scope, "k")
    assert record is not None
    assert record.expected_by_ms == int(clock.now * 1000) + 600_000  # by its lease's end


def test_overdue_work_is_listed_before_its_lease_ends(
    store: IdempotencyStore, scope: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEASE_HEARTBEAT", "off")  # long leases held whole, on a fake clock
    begin(scope, "slow", expected_duration_s=30, store=store)
    begin(scope, "done", expected_duration_s=30, store=store).lock.succeed()
    begin(scope, "failed", expected_duration_s=30, store=store).lock.fail("no", retryable=False)
    begin(scope, "long", expected_duration_s=300, store=store)
    assert store.acquire(scope, "queue", lease_ms=33_000, owner="sqs").acquired  # no expected_by

    def keys(records: Iterator[StoredRecord]) -> set[str]:
        mine = f"{scope}#"
        return {r.record_id[len(mine) :] for r in records if r.record_id.startswith(mine)}

    def overdue() -> set[str]:
        return keys(store.list_overdue())

    def stuck() -> set[str]:
        return keys(store.list_pending(Status.IN_PROGRESS, stuck_only=True))

    assert overdue() == set()
    clock.advance(31)  # past "slow"'s expected completion, inside its lease (35 s)
    assert overdue() == {"slow"}
    assert stuck() == set()
    clock.advance(5)
    assert overdue() == {"slow"}
    assert stuck() == {"slow", "queue"}
    clock.advance(300)
    assert overdue() == {"slow", "long"}
    assert len(list(store.list_overdue(limit=1))) == 1
