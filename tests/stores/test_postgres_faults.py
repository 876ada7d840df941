"""Faults at the PostgreSQL driver's edge (fault_injection/pg_faults.py), as botocore's event
hooks inject them for DynamoDB: lost replies, and a database unreachable past the retries."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from exactly_once import AcquireStatus, ErrorInfo, Status
from exactly_once.stores.records import AcquireRequest, Acquisition, Finish, Lock, WriteResult
from tests.conftest import FakeClock
from tests.stores.pg_support import faulty_store


def _key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}"


def test_a_lost_reply_on_acquire_is_recognised_as_our_own_lock(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    store, pool = faulty_store(pg_dsn, clock, {"acquire": ["lose"]})
    key = _key()
    got = store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert pool.injected == {("acquire", "lose"): 1}
    assert got.status is AcquireStatus.ACQUIRED
    assert got.lock is not None
    record = store.get(scope, key)
    assert record is not None
    assert record.lock_token == got.lock.token
    assert record.attempts == 1
    assert store.complete(got.lock, "r").ok


def test_a_lost_reply_on_a_resume_leaves_the_replay_holding_its_lock(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """The resume was applied and its reply lost; running it again resumes again (the same
    execution), and the lock handed back is the row's own token and fence."""
    store, pool = faulty_store(pg_dsn, clock, {"acquire": [None, "lose"]})
    key = _key()
    first = store.acquire(scope, key, lease_ms=30_000, owner="o", resume_id="e1")
    assert first.lock is not None
    got = store.acquire(scope, key, lease_ms=30_000, owner="o", resume_id="e1")
    assert pool.injected == {("acquire", "lose"): 1}
    assert got.status is AcquireStatus.ACQUIRED
    assert got.resumed
    assert got.lock is not None
    record = store.get(scope, key)
    assert record is not None
    assert (record.lock_token, record.fence) == (got.lock.token, got.lock.fence)
    assert got.lock.fence > first.lock.fence
    assert not store.complete(first.lock, "zombie").ok
    assert store.complete(got.lock, "r").ok


@pytest.mark.parametrize("write", ["complete", "fail", "extend"])
def test_a_lost_reply_on_a_fenced_write_counts_as_done(
    pg_dsn: str, scope: str, clock: FakeClock, write: str
) -> None:
    store, pool = faulty_store(pg_dsn, clock, {})
    key = _key()
    got = store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert got.lock is not None
    pool.decide = lambda kind: "lose" if kind == "write" and not pool.injected else None
    if write == "complete":
        written = store.complete(got.lock, {"n": 1})
        status = Status.COMPLETED
    elif write == "fail":
        written = store.fail(got.lock, ErrorInfo("X", "x", retryable=False))
        status = Status.FAILED
        assert written.replay_nonce  # the nonce the DLQ copy needs survives the lost reply
    else:
        written = store.extend(got.lock, 60_000)
        status = Status.IN_PROGRESS
    assert pool.injected == {("write", "lose"): 1}
    assert written.ok
    record = store.get(scope, key)
    assert record is not None
    assert record.status is status
    if write == "fail":
        assert record.replay_nonce == written.replay_nonce


def test_unreachable_past_the_retries_raises_and_writes_nothing(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    store, pool = faulty_store(pg_dsn, clock, {"acquire": ["fail"] * 3})
    key = _key()
    with pytest.raises(psycopg.OperationalError):
        store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert pool.injected == {("acquire", "fail"): 3}
    assert store.get(scope, key) is None
    assert store.acquire(scope, key, lease_ms=30_000, owner="o").status is AcquireStatus.ACQUIRED


def test_a_completion_throttled_past_the_retries_leaves_the_key_to_its_lease(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    store, _pool = faulty_store(pg_dsn, clock, {"write": ["fail"] * 3})
    key = _key()
    got = store.acquire(scope, key, lease_ms=30_000, owner="o")
    assert got.lock is not None
    with pytest.raises(psycopg.OperationalError):
        store.complete(got.lock, None)
    assert store.acquire(scope, key, lease_ms=30_000, owner="p").status is AcquireStatus.IN_PROGRESS
    clock.advance(31)
    taken = store.acquire(scope, key, lease_ms=30_000, owner="p")
    assert taken.takeover
    assert taken.lock is not None
    assert taken.lock.fence == got.lock.fence + 1


# -- the batches (batch_acquire.py, batch_finish.py): one statement each, the same faults ---------


def _batch(scope: str, keys: list[str]) -> list[AcquireRequest]:
    return [AcquireRequest(scope, key, lease_ms=30_000, owner="o") for key in keys]


def _locks(answers: list[Acquisition | Exception]) -> list[Lock]:
    locks = []
    for answer in answers:
        assert isinstance(answer, Acquisition), answer
        assert answer.status is AcquireStatus.ACQUIRED, answer
        assert answer.lock is not None
        locks.append(answer.lock)
    return locks


@pytest.mark.parametrize("lost", [1, 3], ids=["retried", "past the retries"])
def test_a_lost_reply_on_a_batch_acquire_is_recognised_key_by_key(
    pg_dsn: str, scope: str, clock: FakeClock, lost: int
) -> None:
    """Applied and its reply lost: `_run` sends the batch again (1), or, lost every time, each
    key goes to the single statement with the batch's token (3); both meet rows under our own
    tokens and hold them, as the single acquire does."""
    store, pool = faulty_store(pg_dsn, clock, {"acquire": ["lose"] * lost})
    keys = [_key() for _ in range(3)]
    locks = _locks(store.acquire_many(_batch(scope, keys)))
    assert pool.injected == {("acquire", "lose"): lost}
    for key, lock in zip(keys, locks, strict=True):
        record = store.get(scope, key)
        assert record is not None
        assert (record.lock_token, record.attempts, record.fence) == (lock.token, 1, lock.fence)
    assert all(
        isinstance(w, WriteResult) and w.ok
        for w in store.finish_many([Finish(lock, "r") for lock in locks])
    )


def test_a_batch_acquire_unreachable_past_the_retries_answers_each_key_with_the_error(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    keys = [_key() for _ in range(2)]
    store, pool = faulty_store(pg_dsn, clock, {"acquire": ["fail"] * 9})  # the batch, then each
    answers = store.acquire_many(_batch(scope, keys))
    assert all(isinstance(a, psycopg.OperationalError) for a in answers), answers
    assert pool.injected == {("acquire", "fail"): 9}
    assert [store.get(scope, key) for key in keys] == [None, None]
    assert len(_locks(store.acquire_many(_batch(scope, keys)))) == 2


@pytest.mark.parametrize("fault", ["lose", "fail"])
@pytest.mark.parametrize("times", [1, 3], ids=["retried", "past the retries"])
def test_a_fault_on_a_batch_finish_still_writes_each_outcome_once(
    pg_dsn: str, scope: str, clock: FakeClock, fault: str, times: int
) -> None:
    """A lost reply (applied) or a dropped connection (not sent) on the batch's write: sent
    again, or past the retries each key's own write; every answer is OK, and the permanent
    failure's replay nonce is the one its row keeps."""
    store, pool = faulty_store(pg_dsn, clock, {})
    keys = [_key() for _ in range(3)]
    locks = _locks(store.acquire_many(_batch(scope, keys)))
    plan = [fault] * times
    pool.decide = lambda kind: plan.pop(0) if kind == "write" and plan else None
    written = store.finish_many(
        [
            Finish(locks[0], {"n": 1}),
            Finish(locks[1], error=ErrorInfo("X", "x", retryable=True)),
            Finish(locks[2], error=ErrorInfo("Y", "y", retryable=False)),
        ]
    )
    assert pool.injected == {("write", fault): times}
    assert all(isinstance(w, WriteResult) and w.ok for w in written), written
    records = [store.get(scope, key) for key in keys]
    assert [r.status if r else None for r in records] == [
        Status.COMPLETED,
        Status.FAILED,
        Status.FAILED,
    ]
    assert records[0] is not None
    assert records[0].result == {"n": 1}
    last = written[2]
    assert isinstance(last, WriteResult)
    assert records[2] is not None
    assert last.replay_nonce is not None
    assert last.replay_nonce == records[2].replay_nonce
