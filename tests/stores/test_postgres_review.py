"""Adversarial review of the PostgreSQL store: races against a real server, faults at the driver's
edge, and the holder's transaction. Each "Fixed" test failed on the first version of
the store (its docstring says why); the others pin edges nothing else covers.

Concurrency is real: a second connection holds a row lock in an open transaction (a concurrent
acquirer, or our own earlier attempt still running on a dropped connection), the store's
statement runs in a thread and blocks on it (`_wait_until_blocked` asks the server, it does not
sleep to provoke anything), then the second connection commits.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from exactly_once import AcquireStatus, ClaimStatus, ErrorInfo, LeaseLost, Status, begin, once
from exactly_once.errors import CommitFailed, CommitUnknown, ConfigurationError, PermanentError
from exactly_once.ledger import record_effect
from exactly_once.stores.lifetimes import DAY_S
from exactly_once.stores.postgres.cleanup import delete_expired
from exactly_once.stores.postgres.ids import db_id
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.records import Lock
from tests.conftest import FakeClock
from tests.stores.pg_support import faulty_store, insert_entry, ledger_rows
from tests.waiting import wait_until

T = TypeVar("T")


@pytest.fixture
def pg_store(pg_dsn: str, clock: FakeClock) -> PostgresStore:
    return PostgresStore(pg_dsn, clock=clock)


@pytest.fixture
def locker(pg_dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """A second session with an open transaction: the concurrent writer the store waits for."""
    with psycopg.connect(pg_dsn, autocommit=False) as conn:
        yield conn
        conn.rollback()


def _key() -> str:
    return f"k-{uuid.uuid4().hex[:10]}"


def _wait_until_blocked(locker: psycopg.Connection[Any], future: Future[Any]) -> None:
    """Until some session waits on a lock `locker` holds (or the call already returned)."""
    pid = locker.info.backend_pid
    with psycopg.connect(locker.info.dsn, autocommit=True) as probe:

        def blocked_or_done() -> bool:
            if future.done():
                return True
            row = probe.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                (pid,),
            ).fetchone()
            return bool(row and row[0])

        wait_until(blocked_or_done, lambda: "the store's statement never waited on the row lock")


def _behind(locker: psycopg.Connection[Any], call: Callable[[], T]) -> T:
    """`call()` in a thread, blocked behind `locker`'s open transaction, which then commits."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(call)
        _wait_until_blocked(locker, future)
        locker.commit()
        return future.result(timeout=60)


def _acquired(store: PostgresStore, scope: str, key: str, lease_ms: int = 30_000) -> Lock:
    got = store.acquire(scope, key, lease_ms=lease_ms, owner="holder")
    assert got.status is AcquireStatus.ACQUIRED
    assert got.lock is not None
    return got.lock


# -- stale snapshots: what a refused statement reports --------------------------------------


def test_extend_refused_by_a_takeover_it_waited_for_reports_lease_lost(
    pg_store: PostgresStore, locker: psycopg.Connection[Any], scope: str, clock: FakeClock
) -> None:
    """Fixed: `statements.FENCED_WRITE`'s fallback SELECT reads the statement's snapshot, not
    the row that refused the UPDATE. A zombie's `extend` that waited for a takeover's commit
    sees its own token, IN_PROGRESS, in that old snapshot, which is exactly what `extend`
    leaves, so it reports OK: the zombie believes it still holds a key another holder owns."""
    key = _key()
    zombie = _acquired(pg_store, scope, key, lease_ms=1_000)
    clock.advance(2)  # its lease ended; a takeover is under way
    locker.execute(
        "UPDATE exactly_once.records SET lock_token = 'successor', fence = fence + 1, "
        "attempts = attempts + 1, owner = 'successor', lease_expires_at_ms = %s "
        "WHERE id = %s",
        (int(clock() * 1000) + 60_000, zombie.record_id),
    )
    extended = _behind(locker, lambda: pg_store.extend(zombie, 60_000))
    current = pg_store.get(scope, key)
    assert current is not None
    assert current.lock_token == "successor"
    assert not extended.ok, "extend reported OK for a key that was taken over"


def test_a_completion_that_waited_for_its_own_earlier_attempt_counts_as_done(
    pg_store: PostgresStore, locker: psycopg.Connection[Any], scope: str
) -> None:
    """Fixed (same root cause): our first `complete` is still running on a connection that
    dropped (its reply lost); the retry waits for it, is refused once it commits, and reads
    the snapshot from before: IN_PROGRESS, not the COMPLETED our own write left. It reports
    LEASE_LOST (OnceLock raises LeaseLost, the queue redelivers) where DynamoDB's ALL_OLD shows
    the committed item and counts it as done."""
    key = _key()
    lock = _acquired(pg_store, scope, key)
    locker.execute(  # our first attempt, still in flight on the server
        "UPDATE exactly_once.records SET status = 'COMPLETED', result = '\"r\"', "
        "pending_at_ms = NULL WHERE id = %s AND lock_token = %s",
        (lock.record_id, lock.token),
    )
    written = _behind(locker, lambda: pg_store.complete(lock, "r"))
    current = pg_store.get(scope, key)
    assert current is not None
    assert current.status is Status.COMPLETED
    assert current.lock_token == lock.token
    assert written.ok, f"our own completion was reported as {written.status}"


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        ("status = 'COMPLETED', pending_at_ms = NULL", AcquireStatus.ALREADY_COMPLETED),
        (
            "status = 'FAILED', error_type = 'Bad', error_message = 'no', "
            "error_retryable = false, replay_nonce = 'n1', error_at_ms = 0",
            AcquireStatus.FAILED_PERMANENTLY,
        ),
    ],
)
def test_an_acquire_refused_by_a_commit_it_waited_for_reports_the_committed_row(
    pg_store: PostgresStore,
    locker: psycopg.Connection[Any],
    scope: str,
    sets: str,
    expected: AcquireStatus,
) -> None:
    """PASSES (pins the FOR SHARE in the acquire CTE): the holder's outcome commits while a
    duplicate's INSERT … ON CONFLICT waits on the row. The statement's snapshot still shows
    IN_PROGRESS; the refusal must report the committed outcome (a duplicate, or the DLQ),
    never "in progress". Without FOR SHARE the refused branch would read the old version."""
    key = _key()
    holder = _acquired(pg_store, scope, key)
    locker.execute(
        f"UPDATE exactly_once.records SET {sets} WHERE id = %s",  # noqa: S608 (constants)
        (holder.record_id,),
    )
    got = _behind(locker, lambda: pg_store.acquire(scope, key, lease_ms=30_000, owner="duplicate"))
    assert got.status is expected
    assert got.record is not None
    assert got.record.lock_token == holder.token


def test_an_acquire_refused_by_an_insert_committed_after_its_snapshot(
    pg_store: PostgresStore, locker: psycopg.Connection[Any], scope: str, clock: FakeClock
) -> None:
    """PASSES (pins the STALE_READS loop): a concurrent first acquirer's INSERT commits while
    ours waits on it. The refusing row is not in our snapshot at all (even FOR SHARE cannot
    see it), so the statement returns no row and must run again, not crash or acquire."""
    key = _key()
    now_ms = int(clock() * 1000)
    locker.execute(
        "INSERT INTO exactly_once.records (id, scope, status, lock_token, fence, attempts, "
        "owner, lease_expires_at_ms, created_at_ms, updated_at_ms, expires_at_s, pending_at_ms) "
        "VALUES (%s, %s, 'IN_PROGRESS', 'first', %s, 1, 'first', %s, %s, %s, %s, %s)",
        (
            db_id(scope, key),
            scope,
            now_ms + 1,
            now_ms + 60_000,
            now_ms,
            now_ms,
            now_ms // 1000 + DAY_S,
            now_ms + 60_000,
        ),
    )
    got = _behind(locker, lambda: pg_store.acquire(scope, key, lease_ms=30_000, owner="second"))
    assert got.status is AcquireStatus.IN_PROGRESS
    assert got.record is not None
    assert got.record.lock_token == "first"


def test_an_acquire_behind_a_row_lock_past_lock_timeout_reports_in_progress(
    pg_dsn: str, locker: psycopg.Connection[Any], scope: str, clock: FakeClock
) -> None:
    """Fixed: connections.LOCK_TIMEOUT_MS says an acquire that waits past lock_timeout "reports
    the key in progress". But LockNotAvailable is a psycopg.OperationalError, so `_run` takes
    it for a broken connection: it runs the acquire twice more (waiting each time) and then
    raises, which the queue and the API report as the store being unreachable."""
    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        pg_dsn,
        kwargs={"autocommit": True, "options": "-c lock_timeout=100"},
        min_size=0,
        max_size=2,
        open=True,
    )
    try:
        store = PostgresStore(pg_dsn, clock=clock, pool=pool)
        key = _key()
        holder = _acquired(store, scope, key)
        locker.execute(
            "SELECT 1 FROM exactly_once.records WHERE id = %s FOR UPDATE", (holder.record_id,)
        )
        try:
            got = store.acquire(scope, key, lease_ms=30_000, owner="duplicate")
        except psycopg.errors.LockNotAvailable as exc:
            pytest.fail(f"acquire raised instead of reporting the key in progress: {exc!r}")
        assert got.status is AcquireStatus.IN_PROGRESS
    finally:
        pool.close()


# -- the holder's transaction ----------------------------------------------------------------


def test_a_psycopg_transaction_block_on_ctx_transaction_rolls_back_with_a_refused_completion(
    pg_store: PostgresStore, pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """Fixed (double effect): `transaction()` hands out a connection with autocommit off but no
    transaction started yet. psycopg's idiomatic `with conn.transaction():` on it is then the
    OUTER transaction: it COMMITs at the end of the block, before and regardless of the
    completion. A zombie's business write commits though its completion is refused, so the
    key's effect happens twice."""
    key = _key()
    zombie = begin(scope, key, store=pg_store, lease_s=1)
    conn = zombie.lock.transaction
    with conn.transaction():  # the business function's own "atomic block"
        insert_entry(conn, key, zombie.lock.fence)
    clock.advance(2)
    successor = begin(scope, key, store=pg_store, lease_s=30)
    assert successor.takeover
    with successor.lock.transaction.transaction():
        insert_entry(successor.lock.transaction, key, successor.lock.fence)
    successor.lock.succeed("done")
    with pytest.raises(LeaseLost):
        zombie.lock.succeed("stale")
    zombie.lock.abandon()
    assert ledger_rows(pg_dsn, key) == [(f"by-{successor.lock.fence}", successor.lock.fence)]


def test_commit_failed_is_not_raised_when_the_transaction_committed(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """Found by review: the COMMIT's reply was lost and the settling read could not reach the
    database either (one blip), and CommitFailed ("nothing happened", the API's 503
    "not-committed") was raised for work that committed. Now the store says what it knows:
    CommitUnknown, never retried and never failed, and the record (COMPLETED) settles it."""
    store, pool = faulty_store(pg_dsn, clock, {"complete": ["lose"], "read": ["fail"] * 3})
    key = _key()
    claim = begin(scope, key, store=store)
    insert_entry(claim.lock.transaction, key, claim.lock.fence)
    try:
        with pytest.raises(CommitUnknown):
            claim.lock.succeed({"ok": True})
        assert claim.lock.succeed_tried  # it may have committed: failing it is refused
        with pytest.raises(RuntimeError, match="succeed was already tried"):
            claim.lock.fail(RuntimeError("no"))
    finally:
        claim.lock.abandon()
    assert pool.injected[("complete", "lose")] == 1
    assert len(ledger_rows(pg_dsn, key)) == 1
    record = store.get(scope, key)
    assert record is not None
    assert record.status is Status.COMPLETED


def test_a_permanent_failure_after_commit_failed_is_recorded_as_permanent(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """Fixed: after CommitFailed the store has already marked the record FAILED (retryable)
    with our token, and OnceLock allows `fail` again ("nothing happened"). A permanent `fail`
    is then refused and mistaken for its own lost reply (our token, FAILED): it returns "" and
    the record stays retryable, so the next delivery runs input the caller declared bad."""
    store, _ = faulty_store(pg_dsn, clock, {"complete": ["fail"]})
    key = _key()
    claim = begin(scope, key, store=store)
    insert_entry(claim.lock.transaction, key, claim.lock.fence)
    with pytest.raises(CommitFailed):
        claim.lock.succeed(None)
    nonce = claim.lock.fail(PermanentError("the input is bad"))
    record = store.get(scope, key)
    assert record is not None
    assert record.error is not None
    assert (record.error.retryable, bool(nonce)) == (False, True), record.error


def test_the_transaction_is_refused_once_the_outcome_is_recorded(
    pg_store: PostgresStore, pg_dsn: str, scope: str
) -> None:
    """Fixed (silently lost writes): after `succeed` committed, `lock.transaction` opens a NEW
    transaction on another pooled connection; nothing ever commits it, so writes made on it
    vanish when `abandon` rolls it back (or the connection leaks from the pool when the
    caller used `begin` without `once`). It should raise, as `succeed`/`fail` do."""
    key = _key()
    with once(scope, key, store=pg_store) as claim:
        claim.lock.succeed("done")
        with pytest.raises(RuntimeError):
            insert_entry(claim.lock.transaction, key, claim.lock.fence)
    assert pg_store._open == {}


def test_record_effect_works_for_a_key_with_a_nul_character(
    pg_store: PostgresStore, pg_dsn: str, scope: str
) -> None:
    """Fixed (parity): the store keeps a key with NUL as its SHA-256 (`ids.db_id`), and queue keys
    may contain one (JSON "\\u0000"; storable_key keeps it). But `postgres/ledger.py` writes
    `ctx.key` as it is into `ledger.pk`, and PostgreSQL text cannot hold NUL: the effect can
    never be recorded, so the message fails on every delivery. On DynamoDB it works."""
    key = f"order\x00{uuid.uuid4().hex[:8]}"
    claim = begin(scope, key, store=pg_store)
    assert claim.acquired
    try:
        written = record_effect(claim.lock, {"n": 1})
        claim.lock.succeed("ok")
    finally:
        claim.lock.abandon()
    assert written == f"{scope}#effect"
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            "SELECT fence FROM exactly_once.ledger WHERE sk = %s", (f"{scope}#effect",)
        ).fetchall()
    assert rows == [(claim.lock.fence,)]


def test_holders_with_open_transactions_can_still_extend_when_they_fill_the_pool(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """Fixed (pool exhaustion): `transaction()` takes a pooled connection for the holder and
    `extend` needs a second one. Once open transactions hold every connection (BATCH_CONCURRENCY
    or threads >= IDEMPOTENCY_PG_POOL_MAX; nothing ties the two), every holder waits for a
    connection only another holder can return: extend ends in PoolTimeout (after three pool
    timeouts) and the work fails; the other holder gets through only because the first gave
    its transaction up. Here: a pool of 2, two holders."""
    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=0, max_size=2, timeout=0.5, open=True
    )
    store = PostgresStore(pg_dsn, clock=clock, pool=pool)
    locks = [_acquired(store, scope, _key()) for _ in range(2)]
    both_hold = threading.Barrier(2)

    def holder(lock: Lock) -> str:
        try:
            store.transaction(lock).execute("SELECT 1")
            both_hold.wait(timeout=30)
            extended = store.extend(lock, 60_000)
            return "ok" if extended.ok else str(extended.status)
        except Exception as exc:
            return type(exc).__name__
        finally:
            store.discard(lock)

    try:
        with ThreadPoolExecutor(2) as threads:
            outcomes = list(threads.map(holder, locks))
        assert store._open == {}
        assert outcomes == ["ok", "ok"]
    finally:
        pool.close()


# -- cleanup, and text the server refuses ------------------------------------------------------


def test_after_cleanup_deletes_the_row_the_fence_rises_and_the_zombie_rolls_back(
    pg_store: PostgresStore, pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """PASSES (pins the fence across deletion with a transaction open): the zombie's row
    expires and the cleanup job deletes it while the zombie's transaction is still open; the
    next holder inserts a new row. Its fence must be above the zombie's (the clock floor), and
    the zombie's completion, fenced on its token, must roll its business write back."""
    key = _key()
    zombie = begin(scope, key, store=pg_store, lease_s=1)
    insert_entry(zombie.lock.transaction, key, zombie.lock.fence)
    clock.advance(pg_store.record_ttl_s + DAY_S)
    assert delete_expired(pg_dsn, now_s=clock()) >= 1
    with psycopg.connect(pg_dsn) as conn:
        gone = conn.execute(
            "SELECT count(*) FROM exactly_once.records WHERE id = %s", (db_id(scope, key),)
        ).fetchone()
    assert gone == (0,)
    successor = begin(scope, key, store=pg_store, lease_s=30)
    assert successor.acquired
    assert not successor.takeover
    assert successor.lock.fence > zombie.lock.fence
    insert_entry(successor.lock.transaction, key, successor.lock.fence)
    successor.lock.succeed("done")
    with pytest.raises(LeaseLost):
        zombie.lock.succeed("stale")
    zombie.lock.abandon()
    assert ledger_rows(pg_dsn, key) == [(f"by-{successor.lock.fence}", successor.lock.fence)]
    assert pg_store._open == {}


def test_nul_and_lone_surrogates_in_owner_and_error_are_stored(
    pg_store: PostgresStore, scope: str
) -> None:
    """PASSES (pins text PostgreSQL refuses): a key with NUL, an owner and an error message
    with NUL and a lone surrogate are all stored (sanitised), and the same key finds the
    same record again."""
    key = f"a\x00b-{uuid.uuid4().hex[:6]}"
    got = pg_store.acquire(scope, key, lease_ms=30_000, owner="host\x00\ud800")
    assert got.lock is not None
    assert pg_store.fail(got.lock, ErrorInfo("Bad\x00", "m\x00\udc80", retryable=False)).ok
    claim = begin(scope, key, store=pg_store)
    assert claim.status is ClaimStatus.FAILED
    assert claim.error is not None
    assert "\x00" not in claim.error.message


def test_a_malformed_dsn_never_puts_its_password_in_an_error() -> None:
    """Fixed (secret in errors): libpq's parse error for a URL whose password holds a bare "%"
    quotes the token, password included, and `connections.connect` (migrations, the cleanup
    job, the migration custom resource, whose error CloudFormation shows in stack events)
    lets it through. `describe` already treats such a DSN as unparsable; connect should say
    the same without the text."""
    secret = "s3c%ZZret"
    dsn = f"postgresql://app:{secret}@127.0.0.1:1/db"
    with pytest.raises(ConfigurationError) as raised:
        delete_expired(dsn)
    assert secret not in str(raised.value), str(raised.value)


def test_a_holder_waiting_for_a_pooled_transaction_does_not_stop_the_others_completing(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """Found in a fresh-clone `make test` (the local API, 16 requests at once, one process):
    `transaction()` waited for a pooled connection while holding the store's lock, and the
    holders that would give one back need that lock to complete. Everything stalled until the
    pool's wait ran out. Here: a transaction pool of 1, its holder completes while a second
    holder waits for that connection."""
    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        pg_dsn, kwargs={"autocommit": True}, min_size=0, max_size=1, timeout=60, open=True
    )
    store = PostgresStore(pg_dsn, clock=clock, transaction_pool=pool)
    try:
        first, second = (_acquired(store, scope, _key()) for _ in range(2))
        store.transaction(first).execute("SELECT 1")
        with ThreadPoolExecutor(1) as threads:
            waiting = threads.submit(lambda: store.transaction(second).execute("SELECT 1"))
            wait_until(
                lambda: pool.get_stats().get("requests_waiting", 0) > 0 or None,
                lambda: pool.get_stats(),
            )
            assert store.complete(first, "done").ok  # not blocked by the waiting holder
            waiting.result(timeout=60)
        assert store.complete(second, "done").ok
        assert store._open == {}
    finally:
        pool.close()
