"""The fenced idempotency store against DynamoDB Local (real conditional-write semantics)."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import AcquireStatus, ErrorInfo, IdempotencyStore, Status, WriteStatus
from exactly_once.stores import schema
from exactly_once.stores.records import Lock
from tests.conftest import FakeClock

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

LEASE_MS = 30_000
FIRST_FENCE = int(FakeClock().now * 1000) + 1


@pytest.fixture
def store(ddb: DynamoDBClient, idempotency_table: str, clock: FakeClock) -> IdempotencyStore:
    return IdempotencyStore(idempotency_table, client=ddb, clock=clock)


def acquire(store: IdempotencyStore, scope: str, key: str = "k1", **kwargs: Any) -> Any:
    kwargs.setdefault("lease_ms", LEASE_MS)
    kwargs.setdefault("owner", "fn:req-1")
    return store.acquire(scope, key, **kwargs)


def raw_item(ddb: DynamoDBClient, table: str, scope: str, key: str = "k1") -> dict[str, Any]:
    response = ddb.get_item(
        TableName=table,
        Key={"id": {"S": schema.record_id(scope, key)}},
        ConsistentRead=True,
    )
    return dict(response.get("Item", {}))


class TestAcquireOutcomes:
    def test_new_record_is_acquired_with_fence_one(
        self, store: IdempotencyStore, scope: str, ddb: DynamoDBClient, idempotency_table: str
    ) -> None:
        got = acquire(store, scope, fingerprint="fp-1")
        assert got.status is AcquireStatus.ACQUIRED
        assert got.lock is not None
        assert (got.lock.attempt, got.takeover, got.retry) == (1, False, False)
        assert got.lock.fence == FIRST_FENCE  # the clock's epoch ms + 1: see test_edges
        item = raw_item(ddb, idempotency_table, scope)
        assert item["status"]["S"] == "IN_PROGRESS"
        assert item["lock_token"]["S"] == got.lock.token
        assert item["owner"]["S"] == "fn:req-1"
        assert item["fingerprint"]["S"] == "fp-1"
        assert int(item["lease_expires_at"]["N"]) == got.lock.lease_expires_at_ms
        assert item["pending_shard"]["S"].startswith("IN_PROGRESS#")

    def test_live_lease_reports_in_progress_with_its_expiry(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        first = acquire(store, scope)
        second = acquire(store, scope, owner="fn:req-2")
        assert second.status is AcquireStatus.IN_PROGRESS
        assert second.lock is None
        assert second.record.lease_expires_at_ms == first.lock.lease_expires_at_ms
        assert second.record.owner == "fn:req-1"

    def test_completed_duplicate_returns_the_stored_result(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        lock = acquire(store, scope).lock
        assert store.complete(lock, {"charged": 10}).ok
        dup = acquire(store, scope)
        assert dup.status is AcquireStatus.ALREADY_COMPLETED
        assert dup.record.result == {"charged": 10}
        assert dup.record.status is Status.COMPLETED

    def test_retryable_failure_is_reacquired_with_next_fence(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        lock = acquire(store, scope).lock
        assert store.fail(lock, ErrorInfo("Timeout", "downstream slow", retryable=True)).ok
        again = acquire(store, scope)
        assert again.status is AcquireStatus.ACQUIRED
        assert again.retry is True
        assert (again.lock.fence, again.lock.attempt) == (lock.fence + 1, 2)

    def test_permanent_failure_is_not_reacquired_and_keeps_its_error(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        lock = acquire(store, scope).lock
        store.fail(lock, ErrorInfo("ValueError", "bad amount", retryable=False))
        got = acquire(store, scope)
        assert got.status is AcquireStatus.FAILED_PERMANENTLY
        assert got.record.error == ErrorInfo("ValueError", "bad amount", retryable=False)
        assert got.record.status is Status.FAILED

    def test_only_the_failures_own_replay_nonce_retries_a_permanent_failure(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        lock = acquire(store, scope).lock
        failed = store.fail(lock, ErrorInfo("ValueError", "bad amount", retryable=False))
        assert failed.replay_nonce is not None
        forged = acquire(store, scope, replay_nonce="0" * 32)
        assert forged.status is AcquireStatus.FAILED_PERMANENTLY
        assert forged.record.replay_nonce == failed.replay_nonce  # what a DLQ copy carries
        got = acquire(store, scope, replay_nonce=failed.replay_nonce)
        assert got.status is AcquireStatus.ACQUIRED
        assert got.lock.fence == lock.fence + 1
        after = store.get(scope, "k1")
        assert after is not None
        assert after.replay_nonce is None  # used up: a second replay is stale

    def test_reset_makes_a_permanent_failure_retryable(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        lock = acquire(store, scope).lock
        store.fail(lock, ErrorInfo("ValueError", "bad amount", retryable=False))
        assert store.reset(scope, "k1") is True
        assert acquire(store, scope).status is AcquireStatus.ACQUIRED
        assert store.reset(scope, "k1") is False  # now IN_PROGRESS, nothing to reset

    def test_fingerprint_mismatch(self, store: IdempotencyStore, scope: str) -> None:
        lock = acquire(store, scope, fingerprint="aaa").lock
        store.complete(lock, "ok")
        got = acquire(store, scope, fingerprint="bbb")
        assert got.status is AcquireStatus.FINGERPRINT_MISMATCH
        assert got.record.fingerprint == "aaa"
        # the same payload is a plain duplicate
        assert acquire(store, scope, fingerprint="aaa").status is AcquireStatus.ALREADY_COMPLETED

    def test_fingerprint_mismatch_also_blocks_takeover_and_retry(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        acquire(store, scope, fingerprint="aaa")
        clock.advance(LEASE_MS / 1000 + 1)
        got = acquire(store, scope, fingerprint="bbb")
        assert got.status is AcquireStatus.FINGERPRINT_MISMATCH


class TestLeases:
    def test_expired_lease_is_taken_over(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        first = acquire(store, scope)
        clock.advance(LEASE_MS / 1000 + 0.001)
        got = acquire(store, scope, owner="fn:req-2")
        assert got.status is AcquireStatus.ACQUIRED
        assert got.takeover is True
        assert got.lock.fence == first.lock.fence + 1

    def test_lease_is_honoured_to_the_millisecond(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        acquire(store, scope)
        clock.advance(LEASE_MS / 1000)  # exactly at expiry: still held
        assert acquire(store, scope).status is AcquireStatus.IN_PROGRESS

    def test_blocking_consumer_marks_an_expired_lease_failed_instead(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        first = acquire(store, scope)
        clock.advance(LEASE_MS / 1000 + 1)
        got = acquire(store, scope, block_takeover=True)
        assert got.status is AcquireStatus.FAILED_PERMANENTLY
        assert got.record.error.type == "LeaseExpired"
        assert got.record.error.retryable is False
        # the zombie can no longer complete: the record is FAILED for a person
        assert store.complete(first.lock, "late").status is WriteStatus.LEASE_LOST
        stored = store.get(scope, "k1")
        assert stored is not None
        assert stored.status is Status.FAILED
        # a person replays it deliberately: the DLQ message carries the failure's nonce
        nonce = got.record.replay_nonce
        assert nonce is not None
        assert acquire(store, scope, replay_nonce=nonce).status is AcquireStatus.ACQUIRED

    def test_blocking_consumer_still_waits_for_a_live_lease(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        acquire(store, scope)
        got = acquire(store, scope, block_takeover=True)
        assert got.status is AcquireStatus.IN_PROGRESS

    def test_extend_renews_the_lease_and_is_fenced(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        lock = acquire(store, scope).lock
        clock.advance(20)
        extended = store.extend(lock, LEASE_MS)
        assert extended.ok
        assert extended.lock is not None
        assert extended.lock.lease_expires_at_ms == lock.lease_expires_at_ms + 20_000
        clock.advance(15)  # past the first lease, inside the extended one
        assert acquire(store, scope).status is AcquireStatus.IN_PROGRESS
        clock.advance(LEASE_MS / 1000)
        assert acquire(store, scope).status is AcquireStatus.ACQUIRED
        assert store.extend(extended.lock, LEASE_MS).status is WriteStatus.LEASE_LOST

    def test_release_keeps_the_fence_and_lets_the_next_holder_in(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        lock = acquire(store, scope).lock
        assert store.release(lock, "deadline").ok
        got = acquire(store, scope)
        assert got.status is AcquireStatus.ACQUIRED
        assert got.lock.fence == lock.fence + 1


class TestZombie:
    def test_zombie_complete_and_fail_are_lease_lost_and_change_nothing(
        self,
        store: IdempotencyStore,
        scope: str,
        clock: FakeClock,
        ddb: DynamoDBClient,
        idempotency_table: str,
    ) -> None:
        a = acquire(store, scope, owner="fn:A").lock
        clock.advance(LEASE_MS / 1000 + 1)
        b = acquire(store, scope, owner="fn:B").lock
        assert store.complete(b, {"by": "B"}).ok
        before = raw_item(ddb, idempotency_table, scope)

        lost_complete = store.complete(a, {"by": "A"})
        lost_fail = store.fail(a, ErrorInfo("Boom", "zombie", retryable=True))
        assert lost_complete.status is WriteStatus.LEASE_LOST
        assert lost_fail.status is WriteStatus.LEASE_LOST
        assert lost_complete.current is not None
        assert lost_complete.current.owner == "fn:B"
        assert raw_item(ddb, idempotency_table, scope) == before
        assert before["result"]["S"] == '{"by":"B"}'

    def test_zombie_cannot_overwrite_a_newer_in_progress_holder(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        a = acquire(store, scope, owner="fn:A").lock
        clock.advance(LEASE_MS / 1000 + 1)
        b = acquire(store, scope, owner="fn:B").lock
        assert store.complete(a, "A").status is WriteStatus.LEASE_LOST
        assert store.release(a).status is WriteStatus.LEASE_LOST
        assert store.extend(a, LEASE_MS).status is WriteStatus.LEASE_LOST
        assert store.complete(b, "B").ok

    def test_fence_strictly_increases_across_takeovers(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        fences = []
        for _ in range(6):
            got = acquire(store, scope)
            assert got.status is AcquireStatus.ACQUIRED
            fences.append(got.lock.fence)
            clock.advance(LEASE_MS / 1000 + 1)
        assert fences == [fences[0] + n for n in range(6)]

    def test_complete_never_creates_a_record(
        self, store: IdempotencyStore, scope: str, ddb: DynamoDBClient, idempotency_table: str
    ) -> None:
        ghost = Lock(schema.record_id(scope, "ghost"), "token", 1, 1, 0)
        assert store.complete(ghost, "x").status is WriteStatus.LEASE_LOST
        assert store.fail(ghost, ErrorInfo("E", "m", True)).status is WriteStatus.LEASE_LOST
        assert raw_item(ddb, idempotency_table, scope, "ghost") == {}


class TestExpiry:
    def test_ttl_expired_record_is_reacquired_while_still_present(
        self,
        store: IdempotencyStore,
        scope: str,
        clock: FakeClock,
        ddb: DynamoDBClient,
        idempotency_table: str,
    ) -> None:
        lock = acquire(store, scope, fingerprint="old").lock
        store.complete(lock, "done")
        clock.advance(store.record_ttl_s + 1)
        assert raw_item(ddb, idempotency_table, scope)["status"]["S"] == "COMPLETED"
        assert store.get(scope, "k1") is None  # reads treat it as absent
        got = acquire(store, scope, fingerprint="new")  # a new payload is fine: the old one expired
        assert got.status is AcquireStatus.ACQUIRED
        assert got.takeover is False
        assert got.lock.fence > lock.fence  # the fence never goes back
        assert "result" not in raw_item(ddb, idempotency_table, scope)


class TestResults:
    def test_types_survive_the_round_trip(self, store: IdempotencyStore, scope: str) -> None:
        result = {
            "amount": Decimal("10.10"),
            "tiny": Decimal("1E-7"),
            "nested": [{"qty": 3, "price": 2.5, "ok": True, "none": None}],
            "raw": b"\x00\x01",
            "tags": {"a", "b"},
            "text": "naïve ✓",
        }
        store.complete(acquire(store, scope).lock, result)
        got = acquire(store, scope).record.result
        assert got == result
        assert isinstance(got["amount"], Decimal)
        assert str(got["amount"]) == "10.10"
        assert isinstance(got["nested"][0]["price"], float)

    def test_result_over_the_cap_is_stored_as_its_digest(
        self, ddb: DynamoDBClient, idempotency_table: str, scope: str, clock: FakeClock
    ) -> None:
        store = IdempotencyStore(idempotency_table, client=ddb, clock=clock, result_cap_bytes=1000)
        big = {"blob": "x" * 5000}
        assert store.complete(acquire(store, scope).lock, big).ok
        record = acquire(store, scope).record
        assert record.status is Status.COMPLETED
        assert record.result is None
        assert record.result_size == len('{"blob":"' + "x" * 5000 + '"}')
        assert record.result_sha256 is not None
        assert len(record.result_sha256) == 64

    def test_a_result_near_the_item_limit_never_fails_completion(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        assert store.complete(acquire(store, scope).lock, "y" * 500_000).ok
        assert acquire(store, scope).record.result_size == 500_002

    def test_unserialisable_result_still_completes(
        self, store: IdempotencyStore, scope: str
    ) -> None:
        assert store.complete(acquire(store, scope).lock, object()).ok
        record = acquire(store, scope).record
        assert record.status is Status.COMPLETED
        assert record.result is None
        assert record.result_omitted == "not storable: Unstorable: object is not storable"


class TestPendingIndex:
    def test_lists_stuck_and_failed_work_without_completed(
        self, ddb: DynamoDBClient, fresh_idempotency_table: str, clock: FakeClock
    ) -> None:
        store = IdempotencyStore(fresh_idempotency_table, client=ddb, clock=clock)
        for n in range(12):
            acquire(store, "s", f"stuck-{n}", lease_ms=1_000)
        clock.advance(2)
        for n in range(3):
            acquire(store, "s", f"live-{n}")
        for n in range(4):
            store.complete(acquire(store, "s", f"done-{n}").lock, n)
        for n in range(5):
            lock = acquire(store, "s", f"failed-{n}").lock
            store.fail(lock, ErrorInfo("E", "m", retryable=n % 2 == 0))

        stuck = {r.record_id for r in store.list_pending(Status.IN_PROGRESS, stuck_only=True)}
        assert stuck == {f"s#stuck-{n}" for n in range(12)}
        in_progress = list(store.list_pending(Status.IN_PROGRESS))
        assert len(in_progress) == 15
        failed = list(store.list_pending(Status.FAILED))
        assert {r.record_id for r in failed} == {f"s#failed-{n}" for n in range(5)}
        assert all(r.error is not None for r in failed)
        assert len(list(store.list_pending(Status.FAILED, limit=2))) == 2

        # completion removes the index attributes; TTL-expired records are not listed
        raw = ddb.scan(TableName=fresh_idempotency_table)["Items"]
        done = [i for i in raw if i["status"]["S"] == "COMPLETED"]
        assert done
        assert all("pending_shard" not in i for i in done)
        clock.advance(store.failed_ttl_s + 10)
        assert list(store.list_pending(Status.FAILED)) == []

    def test_completed_is_not_listable(self, store: IdempotencyStore) -> None:
        with pytest.raises(ValueError, match="not in the pending index"):
            list(store.list_pending(Status.COMPLETED))
