"""The store's behaviour, the same on DynamoDB and on PostgreSQL: every acquire outcome, the
fence, leases and takeover, zombies, expiry, the fingerprint, the result codec and replays."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from exactly_once import AcquireStatus, ErrorInfo, Status, WriteStatus
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import Acquisition, WriteResult
from tests.conftest import FakeClock
from tests.stores.conftest import StoreFactory

LEASE_MS = 30_000
FIRST_FENCE = int(FakeClock().now * 1000) + 1


def acquire(store: Store, scope: str, key: str = "k1", **kwargs: Any) -> Acquisition:
    kwargs.setdefault("lease_ms", LEASE_MS)
    kwargs.setdefault("owner", "fn:req-1")
    return store.acquire(scope, key, **kwargs)


def held(got: Acquisition) -> Any:
    assert got.status is AcquireStatus.ACQUIRED, got
    assert got.lock is not None
    return got.lock


class TestAcquireOutcomes:
    def test_a_new_key_is_acquired_with_the_clock_as_fence_floor(
        self, store: Store, scope: str
    ) -> None:
        got = acquire(store, scope, fingerprint="fp-1")
        lock = held(got)
        assert (lock.fence, lock.attempt, got.takeover, got.retry) == (FIRST_FENCE, 1, False, False)
        record = store.get(scope, "k1")
        assert record is not None
        assert (record.status, record.owner, record.fingerprint) == (
            Status.IN_PROGRESS,
            "fn:req-1",
            "fp-1",
        )
        assert record.lock_token == lock.token
        assert record.lease_expires_at_ms == lock.lease_expires_at_ms
        assert record.expires_at_s is not None
        assert record.expires_at_s * 1000 > lock.lease_expires_at_ms  # TTL outlives the lease

    def test_a_live_lease_is_in_progress_with_its_holder(self, store: Store, scope: str) -> None:
        first = held(acquire(store, scope))
        second = acquire(store, scope, owner="fn:req-2")
        assert second.status is AcquireStatus.IN_PROGRESS
        assert second.lock is None
        assert second.record is not None
        assert second.record.lease_expires_at_ms == first.lease_expires_at_ms
        assert second.record.owner == "fn:req-1"

    def test_a_completed_key_is_a_duplicate_with_its_result(self, store: Store, scope: str) -> None:
        assert store.complete(held(acquire(store, scope)), {"charged": 10}).ok
        dup = acquire(store, scope)
        assert dup.status is AcquireStatus.ALREADY_COMPLETED
        assert dup.record is not None
        assert dup.record.result == {"charged": 10}

    def test_a_retryable_failure_is_taken_again_with_the_next_fence(
        self, store: Store, scope: str
    ) -> None:
        lock = held(acquire(store, scope))
        assert store.fail(lock, ErrorInfo("Timeout", "downstream slow", retryable=True)).ok
        again = acquire(store, scope)
        assert (held(again).fence, held(again).attempt, again.retry) == (lock.fence + 1, 2, True)

    def test_a_permanent_failure_keeps_its_error_and_only_its_nonce_replays_it(
        self, store: Store, scope: str
    ) -> None:
        lock = held(acquire(store, scope))
        failed = store.fail(lock, ErrorInfo("ValueError", "bad amount", retryable=False))
        assert failed.ok
        assert failed.replay_nonce
        got = acquire(store, scope)
        assert got.status is AcquireStatus.FAILED_PERMANENTLY
        assert got.record is not None
        assert got.record.error == ErrorInfo("ValueError", "bad amount", retryable=False)
        assert (
            acquire(store, scope, replay_nonce="0" * 32).status is AcquireStatus.FAILED_PERMANENTLY
        )
        replayed = acquire(store, scope, replay_nonce=failed.replay_nonce)
        assert held(replayed).fence == lock.fence + 1
        assert replayed.retry
        record = store.get(scope, "k1")
        assert record is not None
        assert record.replay_nonce is None

    def test_reset_makes_a_permanent_failure_retryable(self, store: Store, scope: str) -> None:
        store.fail(held(acquire(store, scope)), ErrorInfo("ValueError", "bad", retryable=False))
        assert store.reset(scope, "k1") is True
        assert acquire(store, scope).status is AcquireStatus.ACQUIRED
        assert store.reset(scope, "k1") is False  # not FAILED any more

    def test_an_expired_lease_is_taken_over_with_the_next_fence(
        self, store: Store, scope: str, clock: FakeClock
    ) -> None:
        first = held(acquire(store, scope))
        clock.advance(LEASE_MS / 1000 + 1)
        got = acquire(store, scope, owner="fn:req-2")
        assert got.takeover
        assert held(got).fence == first.fence + 1
        assert held(got).attempt == 2

    def test_blocked_takeover_fails_the_key_for_a_person(
        self, store: Store, scope: str, clock: FakeClock
    ) -> None:
        first = held(acquire(store, scope))
        clock.advance(LEASE_MS / 1000 + 1)
        got = acquire(store, scope, block_takeover=True)
        assert got.status is AcquireStatus.FAILED_PERMANENTLY
        assert got.record is not None
        assert got.record.error is not None
        assert got.record.error.type == "LeaseExpired"
        assert got.record.replay_nonce
        late = store.complete(first, "late")  # the blocked holder is not mistaken for itself
        assert late.status is WriteStatus.LEASE_LOST
        assert acquire(store, scope, block_takeover=True).status is AcquireStatus.FAILED_PERMANENTLY


class TestFingerprint:
    def test_another_payload_under_the_same_key_is_a_mismatch_in_every_state(
        self, store: Store, scope: str
    ) -> None:
        lock = held(acquire(store, scope, fingerprint="a"))
        assert acquire(store, scope, fingerprint="b").status is AcquireStatus.FINGERPRINT_MISMATCH
        assert acquire(store, scope, fingerprint="a").status is AcquireStatus.IN_PROGRESS
        store.complete(lock, 1)
        assert acquire(store, scope, fingerprint="b").status is AcquireStatus.FINGERPRINT_MISMATCH
        assert acquire(store, scope, fingerprint="a").status is AcquireStatus.ALREADY_COMPLETED

    def test_a_retryable_failure_is_not_taken_by_another_payload(
        self, store: Store, scope: str
    ) -> None:
        store.fail(held(acquire(store, scope, fingerprint="a")), ErrorInfo("T", "t", True))
        assert acquire(store, scope, fingerprint="b").status is AcquireStatus.FINGERPRINT_MISMATCH
        assert acquire(store, scope, fingerprint="a").status is AcquireStatus.ACQUIRED


class TestZombies:
    def test_a_zombie_can_neither_complete_fail_nor_extend(
        self, store: Store, scope: str, clock: FakeClock
    ) -> None:
        zombie = held(acquire(store, scope))
        clock.advance(LEASE_MS / 1000 + 1)
        successor = held(acquire(store, scope, owner="fn:req-2"))
        writes: tuple[Callable[[], WriteResult], ...] = (
            lambda: store.complete(zombie, "stale"),
            lambda: store.fail(zombie, ErrorInfo("X", "x", retryable=True)),
            lambda: store.extend(zombie, LEASE_MS),
            lambda: store.release(zombie),
        )
        for write in writes:
            refused = write()
            assert refused.status is WriteStatus.LEASE_LOST
            assert refused.current is not None
            assert refused.current.fence == successor.fence
        assert store.complete(successor, "fresh").ok
        dup = acquire(store, scope)
        assert dup.record is not None
        assert dup.record.result == "fresh"

    def test_a_holder_that_extends_is_not_taken_over(
        self, store: Store, scope: str, clock: FakeClock
    ) -> None:
        lock = held(acquire(store, scope))
        clock.advance(LEASE_MS / 1000 - 1)
        extended = store.extend(lock, LEASE_MS)
        assert extended.ok
        assert extended.lock is not None
        clock.advance(LEASE_MS / 1000 - 1)  # past the first lease, inside the new one
        assert acquire(store, scope).status is AcquireStatus.IN_PROGRESS
        assert store.complete(extended.lock, "done").ok


class TestOwnLostReplies:
    """A write applied whose reply was lost is retried; the retry meets its own write."""

    def test_complete_fail_and_extend_twice_are_ok(self, store: Store, scope: str) -> None:
        lock = held(acquire(store, scope))
        assert store.extend(lock, LEASE_MS).ok
        assert store.extend(lock, LEASE_MS).ok
        assert store.complete(lock, 1).ok
        assert store.complete(lock, 1).ok
        other = held(acquire(store, scope, "k2"))
        first = store.fail(other, ErrorInfo("X", "x", retryable=False))
        again = store.fail(other, ErrorInfo("X", "x", retryable=False))
        assert again.ok
        assert again.replay_nonce == first.replay_nonce


class TestFenceAndExpiry:
    def test_the_fence_strictly_increases_across_takeovers_retries_and_generations(
        self, store: Store, scope: str, clock: FakeClock, sweep: Callable[[str], None]
    ) -> None:
        fences = [held(acquire(store, scope)).fence]
        clock.advance(LEASE_MS / 1000 + 1)
        lock = held(acquire(store, scope))  # takeover
        fences.append(lock.fence)
        store.fail(lock, ErrorInfo("X", "x", retryable=True))
        lock = held(acquire(store, scope))  # retry
        fences.append(lock.fence)
        store.complete(lock, None)
        clock.advance(store.record_ttl_s + 1)
        renewed = acquire(store, scope)  # the expired record counts as absent: a new generation
        assert held(renewed).attempt == 1
        assert not renewed.takeover
        assert not renewed.retry
        fences.append(held(renewed).fence)
        store.complete(held(renewed), None)
        clock.advance(store.record_ttl_s + 1)
        sweep(held(renewed).record_id)  # deleted: the fence must not start again
        fences.append(held(acquire(store, scope)).fence)
        assert fences == sorted(set(fences)), fences

    def test_an_expired_record_reads_as_absent(
        self, store: Store, scope: str, clock: FakeClock
    ) -> None:
        store.complete(held(acquire(store, scope)), "r")
        assert store.get(scope, "k1") is not None
        clock.advance(store.record_ttl_s + 1)
        assert store.get(scope, "k1") is None

    def test_ttl_never_frees_a_live_lease(
        self, make_store: StoreFactory, scope: str, clock: FakeClock
    ) -> None:
        store = make_store(record_ttl_s=60)
        lock = held(store.acquire(scope, "k1", lease_ms=600_000, owner="long"))
        clock.advance(120)  # past record_ttl_s, well inside the lease
        assert (
            store.acquire(scope, "k1", lease_ms=1_000, owner="x").status
            is AcquireStatus.IN_PROGRESS
        )
        assert store.complete(lock, None).ok


class TestListings:
    def test_pending_lists_stuck_locks_failures_and_overdue_work(
        self, make_store: StoreFactory, scope: str, clock: FakeClock
    ) -> None:
        store = make_store()
        stuck = held(acquire(store, scope, "stuck"))
        failed = held(acquire(store, scope, "failed"))
        store.fail(failed, ErrorInfo("X", "x", retryable=False))
        late = held(acquire(store, scope, "late", expected_duration_ms=1_000))
        store.complete(held(acquire(store, scope, "done")), None)
        clock.advance(2)
        mine = scope + "#"
        overdue = [r.record_id for r in store.list_overdue() if r.record_id.startswith(mine)]
        assert overdue == [late.record_id]
        clock.advance(LEASE_MS / 1000)
        in_progress = {
            r.record_id
            for r in store.list_pending(Status.IN_PROGRESS, stuck_only=True)
            if r.record_id.startswith(mine)
        }
        assert in_progress == {stuck.record_id, late.record_id}
        failures = [r for r in store.list_pending(Status.FAILED) if r.record_id.startswith(mine)]
        assert [r.record_id for r in failures] == [failed.record_id]
        with pytest.raises(ValueError, match="completed"):
            list(store.list_pending(Status.COMPLETED))


class TestResults:
    @pytest.mark.parametrize(
        "result",
        [
            None,
            {"amount": Decimal("10.50"), "raw": b"\x00\xff", "tags": {1, 2}, "pair": (1, "a")},
            {1: "int key", (2, 3): "tuple key"},
            10**5000,  # over str()'s 4300-digit limit
            {"__eo_set__": [1, 2]},  # looks like the codec's own tag
            "\ud83d lone surrogate",
            "nul \x00 inside",
        ],
        ids=["none", "types", "keys", "huge-int", "look-alike", "surrogate", "nul"],
    )
    def test_results_come_back_with_their_types(
        self, store: Store, scope: str, result: Any
    ) -> None:
        assert store.complete(held(acquire(store, scope)), result).ok
        record = store.get(scope, "k1")
        assert record is not None
        assert record.result == result
        assert record.result_omitted is None

    def test_a_result_over_the_cap_keeps_its_digest_and_size(
        self, make_store: StoreFactory, scope: str
    ) -> None:
        store = make_store(result_cap_bytes=1024)
        store.complete(held(acquire(store, scope)), "x" * 5000)
        record = store.get(scope, "k1")
        assert record is not None
        assert record.status is Status.COMPLETED
        assert record.result is None
        assert record.result_size == 5002
        assert record.result_sha256
        assert record.result_omitted == "5002 bytes, over the 1024-byte cap"

    def test_an_unstorable_result_still_completes_with_the_reason(
        self, store: Store, scope: str
    ) -> None:
        assert store.complete(held(acquire(store, scope)), object()).ok
        record = store.get(scope, "k1")
        assert record is not None
        assert record.status is Status.COMPLETED
        assert record.result_omitted is not None
        assert "not storable" in record.result_omitted


class TestHostileText:
    def test_keys_and_errors_with_nul_and_lone_surrogates_are_kept(
        self, store: Store, scope: str
    ) -> None:
        lock = held(acquire(store, scope, "nul\x00key", owner="own\x00er"))
        assert store.get(scope, "nul\x00key") is not None
        store.fail(lock, ErrorInfo("Bad\x00Type", "message \ud83d with \x00", retryable=False))
        record = store.get(scope, "nul\x00key")
        assert record is not None
        assert record.error is not None
        assert record.error.message == "message \ufffd with \ufffd"
        assert acquire(store, scope, "nul\x00key").status is AcquireStatus.FAILED_PERMANENTLY
