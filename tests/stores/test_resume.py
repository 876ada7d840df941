"""`resume_id`: a holder that outlives one invocation (a durable execution) resumes its own lock.

On both stores: the same id resumes an IN_PROGRESS lock, live lease or not, with a new token and
fence (so the earlier invocation, if it still runs, is fenced out); another id, or none, still
meets "in progress"; any other acquire clears the id, so a resume never reaches a lock that
someone else took over; a finished key is never resumed.
"""

from __future__ import annotations

from typing import Any

import pytest

from exactly_once.stores.protocol import Store
from exactly_once.stores.records import AcquireStatus, Acquisition, ErrorInfo, WriteStatus
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock

LEASE_MS = 60_000
ARN = "arn:aws:lambda:eu-west-1:123456789012:function:f:$LATEST/durable-execution/e1/inv-1"
OTHER = ARN.replace("/e1/", "/e2/")


def take(store: Store, scope: str, resume_id: str | None, **kwargs: Any) -> Acquisition:
    return store.acquire(scope, "k", lease_ms=LEASE_MS, owner="o", resume_id=resume_id, **kwargs)


def test_the_same_execution_resumes_its_live_lock_and_fences_out_the_earlier_invocation(
    store: Store, scope: str
) -> None:
    first = take(store, scope, ARN)
    assert first.status is AcquireStatus.ACQUIRED
    assert not first.resumed
    assert first.lock is not None
    again = take(store, scope, ARN)
    assert again.status is AcquireStatus.ACQUIRED
    assert (again.resumed, again.takeover) == (True, True)
    assert again.lock is not None
    assert again.lock.fence > first.lock.fence
    assert again.lock.token != first.lock.token
    # The earlier invocation (a zombie, if it still runs) can write nothing any more.
    assert store.complete(first.lock, "zombie").status is WriteStatus.LEASE_LOST
    assert store.complete(again.lock, "done").ok
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.result) == (Status.COMPLETED, "done")


@pytest.mark.parametrize("other", [OTHER, None], ids=["another-execution", "no-execution"])
def test_another_holder_still_meets_the_lock_in_progress(
    store: Store, scope: str, other: str | None
) -> None:
    assert take(store, scope, ARN).acquired
    refused = take(store, scope, other)
    assert refused.status is AcquireStatus.IN_PROGRESS
    assert refused.record is not None
    assert refused.record.resume_id == ARN


def test_a_takeover_clears_the_id_so_the_execution_cannot_resume_its_successors_lock(
    store: Store, scope: str, clock: FakeClock
) -> None:
    assert take(store, scope, ARN).acquired
    clock.advance(LEASE_MS / 1000 + 1)
    successor = take(store, scope, None)
    assert successor.acquired
    assert successor.takeover
    assert not successor.resumed
    record = store.get(scope, "k")
    assert record is not None
    assert record.resume_id is None
    late = take(store, scope, ARN)
    assert late.status is AcquireStatus.IN_PROGRESS  # the successor's, not ours any more


def test_a_finished_key_is_never_resumed(store: Store, scope: str) -> None:
    held = take(store, scope, ARN)
    assert held.lock is not None
    assert store.complete(held.lock, {"paid": 1}).ok
    replay = take(store, scope, ARN)
    assert replay.status is AcquireStatus.ALREADY_COMPLETED
    assert replay.record is not None
    assert replay.record.result == {"paid": 1}

    other = take(store, scope + "-f", ARN)
    assert other.lock is not None
    assert store.fail(other.lock, ErrorInfo("Declined", "no", retryable=False)).ok
    assert take(store, scope + "-f", ARN).status is AcquireStatus.FAILED_PERMANENTLY


def test_a_resume_still_checks_the_fingerprint(store: Store, scope: str) -> None:
    assert take(store, scope, ARN, fingerprint="a").acquired
    assert take(store, scope, ARN, fingerprint="b").status is AcquireStatus.FINGERPRINT_MISMATCH


def test_blocking_takeovers_does_not_block_a_resume(
    store: Store, scope: str, clock: FakeClock
) -> None:
    """`block_takeover` guards against running someone else's work twice; resuming one's own
    lock after its lease ran out (a long wait) is not a takeover to block."""
    assert take(store, scope, ARN, block_takeover=True).acquired
    clock.advance(LEASE_MS / 1000 + 1)
    resumed = take(store, scope, ARN, block_takeover=True)
    assert resumed.status is AcquireStatus.ACQUIRED
    assert resumed.resumed
    # ...while another execution is still blocked: FAILED for a person, as before.
    clock.advance(LEASE_MS / 1000 + 1)
    blocked = take(store, scope, OTHER, block_takeover=True)
    assert blocked.status is AcquireStatus.FAILED_PERMANENTLY


def test_an_expired_generation_of_its_own_is_renewed_for_the_execution(
    store: Store, scope: str, clock: FakeClock
) -> None:
    first = take(store, scope, ARN)
    assert first.lock is not None
    clock.advance(30 * 86_400)  # past lease and record TTL: the record counts as absent
    again = take(store, scope, ARN)
    assert again.acquired
    assert again.lock is not None
    assert again.lock.fence > first.lock.fence
    record = store.get(scope, "k")
    assert record is not None
    assert record.resume_id == ARN


@pytest.mark.parametrize(
    "hostile",
    ["lone \ud83d surrogate", "nul \x00 inside", "x" * 5000, "é🙂" * 300],
    ids=["lone-surrogate", "nul", "5000-chars", "multibyte"],
)
def test_a_hostile_resume_id_still_resumes_only_its_own_lock(
    store: Store, scope: str, hostile: str
) -> None:
    """The id is the caller's text (an ARN in Lambda): any valid string works, on both stores."""
    first = take(store, scope, hostile)
    assert first.acquired
    again = take(store, scope, hostile)
    assert again.resumed
    assert take(store, scope, hostile + "-other").status is AcquireStatus.IN_PROGRESS
