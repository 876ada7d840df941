"""The heartbeat in this process: a live holder keeps its key past the short lease, renewals stop
at the long lease's end (a hung handler loses the key when Lambda would have killed it), one
thread serves every lock, clones forget it, a snapshot stops it, and its settings are strict."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from exactly_once import heartbeat, lifecycle
from exactly_once.claims import Claim, ClaimStatus, claim
from exactly_once.effects import LeaseLost
from exactly_once.errors import ConfigurationError
from exactly_once.lease import DEFAULT_HEARTBEAT_MS, LeasePolicy, heartbeat_ms_from_env
from exactly_once.once_lock import begin
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status
from tests.waiting import wait_until

HEARTBEAT_MS = 2_000
LONG_MS = 600_000


def now_ms() -> float:
    return time.time() * 1000


def key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}"


def take(store: Store, scope: str, k: str, lease_ms: int = LONG_MS, **kwargs: Any) -> Claim:
    return claim(store, scope, k, lease_ms=lease_ms, owner="holder", **kwargs)


def rival(store: Store, scope: str, k: str) -> Claim:
    return claim(store, scope, k, lease_ms=30_000, owner="rival")


def threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "exactly-once-heartbeat"]


def test_a_live_holder_keeps_its_key_past_the_short_lease(store: Store, scope: str) -> None:
    k = key()
    held = take(store, scope, k, heartbeat_ms=HEARTBEAT_MS)
    first_end = held.lock.store_lock.lease_expires_at_ms
    assert first_end <= now_ms() + HEARTBEAT_MS  # the store holds the short lease only
    record = store.get(scope, k)
    assert record is not None
    assert record.expected_by_ms is not None
    assert record.expected_by_ms > first_end + LONG_MS / 2  # the long budget, for people

    # Wait for a renewal made after the first short lease had ended (the stored end is then
    # past it by more than a lease): only renewals can have kept the key. Observed, not timed,
    # so a loaded machine only makes the wait longer.
    def stored_end() -> int:
        current = store.get(scope, k)
        return (current.lease_expires_at_ms or 0) if current else 0

    wait_until(lambda: stored_end() > first_end + HEARTBEAT_MS, stored_end)
    assert rival(store, scope, k).status is ClaimStatus.IN_PROGRESS
    renewed = store.get(scope, k)
    assert renewed is not None
    assert renewed.lease_expires_at_ms is not None
    assert renewed.lease_expires_at_ms > first_end
    assert renewed.expires_at_s is not None
    assert renewed.lease_expires_at_ms < renewed.expires_at_s * 1000  # TTL beyond the lease
    assert held.lock.lease_ends_at * 1000 > first_end  # the holder sees its renewals

    held.lock.succeed("done")
    done = store.get(scope, k)
    assert done is not None
    assert done.status is Status.COMPLETED
    assert not held.lock.heartbeat_lost


def test_renewals_stop_at_the_long_lease_so_a_hung_handler_loses_the_key(
    store: Store, scope: str
) -> None:
    """A handler that hangs while its process lives: the key is freed when the budget (the
    long lease: deadline plus margin) ends, as it would be without a heartbeat."""
    k = key()
    before = now_ms()
    budget_ms = 3 * HEARTBEAT_MS
    held = take(store, scope, k, lease_ms=budget_ms, heartbeat_ms=HEARTBEAT_MS)
    taken = wait_until(
        lambda: c if (c := rival(store, scope, k)).acquired else None,
        lambda: store.get(scope, k),
    )
    assert taken.takeover
    # The last renewal asks for the budget's time left, measured just before its store call: a
    # loaded machine that preempts the thread in between moves the end by that delay, so allow
    # half a second. Renewing a whole beat past the budget overshoots by over a second.
    assert held.lock.store_lock.lease_expires_at_ms <= before + budget_ms + 500
    with pytest.raises(LeaseLost):
        held.lock.succeed("too late")
    taken.lock.succeed(None)


def test_short_leases_get_no_heartbeat(store: Store, scope: str) -> None:
    held = take(store, scope, key(), lease_ms=HEARTBEAT_MS, heartbeat_ms=HEARTBEAT_MS)
    assert held.lock._beat is None
    held.lock.succeed(None)


def test_one_thread_renews_a_whole_batch(store: Store, scope: str) -> None:
    before = heartbeat.held()
    claims = [take(store, scope, key(), heartbeat_ms=HEARTBEAT_MS) for _ in range(10)]
    assert heartbeat.held() == before + 10
    assert len([t for t in threads() if t.is_alive()]) == 1
    assert all(t.daemon for t in threads())
    for c in claims:
        c.lock.abandon()  # the entry points' `finally`: no outcome, no more renewals
    assert heartbeat.held() == before


def test_a_clone_renews_none_of_its_parents_locks(store: Store, scope: str) -> None:
    k = key()
    held = take(store, scope, k, heartbeat_ms=HEARTBEAT_MS)
    assert heartbeat.held() >= 1
    lifecycle.cloned()  # what a fork child and a SnapStart restore run
    assert heartbeat.held() == 0
    # Nothing renews the lock in this "clone" any more: its lease lapses and the key is free.
    taken = wait_until(
        lambda: c if (c := rival(store, scope, k)).acquired else None,
        lambda: store.get(scope, k),
    )
    assert taken.takeover
    assert not held.lock.heartbeat_lost
    taken.lock.succeed(None)


def test_a_snapshot_stops_the_thread_and_the_next_lock_starts_one(store: Store, scope: str) -> None:
    take(store, scope, key(), heartbeat_ms=HEARTBEAT_MS).lock.abandon()
    heartbeat._halt()  # what lifecycle.before_snapshot runs
    assert not [t for t in threads() if t.is_alive()]
    lifecycle.cloned()  # the restore
    k = key()
    held = take(store, scope, k, heartbeat_ms=HEARTBEAT_MS)
    assert len([t for t in threads() if t.is_alive()]) == 1
    first_end = held.lock.store_lock.lease_expires_at_ms
    wait_until(lambda: held.lock.store_lock.lease_expires_at_ms > first_end, lambda: first_end)
    held.lock.succeed(None)


def test_the_lifecycle_runs_the_heartbeats_clone_and_snapshot_hooks() -> None:
    assert heartbeat._forget in lifecycle._on_clone
    assert heartbeat._halt in lifecycle._on_snapshot


def test_a_transient_renewal_failure_is_retried_at_the_next_beat(store: Store, scope: str) -> None:
    k = key()
    held = take(store, scope, k, heartbeat_ms=HEARTBEAT_MS)
    beat = held.lock._beat
    assert beat is not None
    real = beat.store
    failures: list[int] = []

    class Throttled:
        def extend(self, lock: Any, lease_ms: int) -> Any:
            if not failures:
                failures.append(lease_ms)
                raise RuntimeError("ProvisionedThroughputExceededException")
            return real.extend(lock, lease_ms)

    beat.store = Throttled()  # type: ignore[assignment]
    wait_until(lambda: beat.renewals >= 1, lambda: (failures, beat.renewals))
    assert failures
    assert not beat.lost
    assert rival(store, scope, k).status is ClaimStatus.IN_PROGRESS
    held.lock.succeed(None)


def test_begin_reads_the_heartbeat_settings(
    store: Store, scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEASE_HEARTBEAT_MS", "1500")
    beating = begin(scope, key(), store=store, lease_s=600)
    assert beating.lock.store_lock.lease_expires_at_ms <= now_ms() + 1500
    beating.lock.succeed(None)
    monkeypatch.setenv("LEASE_HEARTBEAT", "off")
    long = begin(scope, key(), store=store, lease_s=600)
    assert long.lock._beat is None
    assert long.lock.store_lock.lease_expires_at_ms > now_ms() + 500_000
    long.lock.succeed(None)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, DEFAULT_HEARTBEAT_MS),
        ({"LEASE_HEARTBEAT": "AUTO", "LEASE_HEARTBEAT_MS": "2000"}, 2000),
        ({"LEASE_HEARTBEAT": "off"}, None),
    ],
)
def test_heartbeat_settings(
    env: dict[str, str], expected: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LEASE_HEARTBEAT", raising=False)
    monkeypatch.delenv("LEASE_HEARTBEAT_MS", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert heartbeat_ms_from_env() == expected


@pytest.mark.parametrize(
    "env",
    [
        {"LEASE_HEARTBEAT": "of"},
        {"LEASE_HEARTBEAT": "true"},
        {"LEASE_HEARTBEAT_MS": "2s"},
        {"LEASE_HEARTBEAT_MS": "500"},
    ],
)
def test_unknown_heartbeat_settings_are_refused(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError):
        heartbeat_ms_from_env()


def test_a_policy_refuses_a_tiny_heartbeat_lease() -> None:
    with pytest.raises(ConfigurationError):
        LeasePolicy(heartbeat_ms=10)
    assert LeasePolicy(heartbeat_ms=None).heartbeat_ms is None
