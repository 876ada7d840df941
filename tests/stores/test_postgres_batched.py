"""The PostgreSQL store's batches (batch_acquire.py, batch_finish.py) against its single calls.

Every record state is prepared twice, on two keys, by the same steps on the same clock; one key
goes through `acquire` and `complete`/`fail`, the other through ONE `acquire_many` and ONE
`finish_many` with every other state's key, and both answers and both rows afterwards must be
the same. Then what only a batch can get wrong: its round trips (counted on the wire), a
zombie in it, a batch that waited on a committing holder, a lent transaction handed to it, and
batches racing for the same keys.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from benchmarks.pg_proxy import RoundTripProxy
from exactly_once import AcquireStatus, ErrorInfo, Status
from exactly_once.errors import LockInherited
from exactly_once.stores import one_by_one
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.records import (
    AcquireRequest,
    Acquisition,
    Finish,
    Lock,
    StoredRecord,
    WriteResult,
)
from tests.conftest import FakeClock
from tests.stores.pg_support import business_table, table_rows
from tests.waiting import wait_until

LIVE_MS, SHORT_MS = 600_000, 1_000
RETRYABLE = ErrorInfo("Boom", "try again", retryable=True)
PERMANENT = ErrorInfo("Bad", "never again", retryable=False)


def _key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}"


@dataclasses.dataclass
class Prepared:
    """A key brought into a state: the request to send for it, and the preparer's lock."""

    key: str
    request: dict[str, Any]
    lock: Lock | None = None


Prepare = Callable[[PostgresStore, str, str, str], Prepared]


def _held(store: PostgresStore, scope: str, key: str, lease_ms: int, **kw: Any) -> Lock:
    got = store.acquire(scope, key, lease_ms=lease_ms, owner="first", **kw)
    assert got.lock is not None
    return got.lock


def _expire_ttl(dsn: str, record_id: str) -> None:
    """The row's TTL long past (what cleanup has not deleted yet: it counts as absent)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE exactly_once.records SET expires_at_s = expires_at_s - 10000000 WHERE id = %s",
            (record_id,),
        )


def _state(
    lease_ms: int | None = None,
    *,
    finish: ErrorInfo | str | None = "none",
    fp: str | None = None,
    ttl_expired: bool = False,
    request: dict[str, Any] | None = None,
    nonce_request: bool = False,
) -> Prepare:
    """A recipe: acquire (if lease_ms), then complete (finish=None) or fail (an ErrorInfo),
    then maybe expire the TTL; the request to send afterwards."""

    def prepare(store: PostgresStore, dsn: str, scope: str, key: str) -> Prepared:
        asked = dict(request or {})
        if lease_ms is None:
            return Prepared(key, asked)
        kw = {"fingerprint": fp} if fp else {}
        lock = _held(store, scope, key, lease_ms, **kw)
        if finish is None:
            assert store.complete(lock, {"n": 1}).ok
        elif isinstance(finish, ErrorInfo):
            written = store.fail(lock, finish)
            assert written.ok
            if nonce_request:
                asked["replay_nonce"] = written.replay_nonce
        if ttl_expired:
            _expire_ttl(dsn, lock.record_id)
        return Prepared(key, asked, lock)

    return prepare


STATES: dict[str, Prepare] = {
    "new": _state(),
    "new, expected duration": _state(request={"expected_duration_ms": 5_000}),
    "live lease": _state(LIVE_MS),
    "live lease, blocked consumer": _state(LIVE_MS, request={"block_takeover": True}),
    "expired lease": _state(SHORT_MS),
    "expired lease, blocked consumer": _state(SHORT_MS, request={"block_takeover": True}),
    "completed": _state(LIVE_MS, finish=None),
    "failed retryable": _state(LIVE_MS, finish=RETRYABLE),
    "failed permanently": _state(LIVE_MS, finish=PERMANENT),
    "failed permanently, its replay": _state(LIVE_MS, finish=PERMANENT, nonce_request=True),
    "failed permanently, another nonce": _state(
        LIVE_MS, finish=PERMANENT, request={"replay_nonce": "not-it"}
    ),
    "completed, other fingerprint": _state(
        LIVE_MS, finish=None, fp="a", request={"fingerprint": "b"}
    ),
    "failed retryable, other fingerprint": _state(
        LIVE_MS, finish=RETRYABLE, fp="a", request={"fingerprint": "b"}
    ),
    "live, same fingerprint": _state(LIVE_MS, fp="a", request={"fingerprint": "a"}),
    "completed, ttl expired": _state(LIVE_MS, finish=None, ttl_expired=True),
    "expired lease, ttl expired": _state(SHORT_MS, ttl_expired=True),
    "expired lease, ttl expired, blocked": _state(
        SHORT_MS, ttl_expired=True, request={"block_takeover": True}
    ),
}


def _request(scope: str, prepared: Prepared) -> AcquireRequest:
    return AcquireRequest(scope, prepared.key, lease_ms=30_000, owner="second", **prepared.request)


def _record(record: StoredRecord | None, tokens: dict[str | None, str]) -> dict[str, Any] | None:
    """A record without what differs between two keys by construction: its id, and tokens and
    nonces, named by their role instead."""
    if record is None:
        return None
    seen = dataclasses.asdict(record)
    del seen["record_id"]
    seen["lock_token"] = tokens.get(record.lock_token, "another token")
    seen["replay_nonce"] = None if record.replay_nonce is None else "a nonce"
    return seen


def _acquisition(got: Acquisition | Exception, tokens: dict[str | None, str]) -> Any:
    if isinstance(got, Exception):
        return repr(got)
    lock = None
    if got.lock is not None:
        lock = (got.lock.fence, got.lock.attempt, got.lock.lease_expires_at_ms, got.lock.scope)
    flags = (got.takeover, got.retry, got.resumed)
    return got.status, lock, flags, _record(got.record, tokens)


def _write(got: WriteResult | Exception, tokens: dict[str | None, str]) -> Any:
    if isinstance(got, Exception):
        return repr(got)
    lease = None if got.lock is None else got.lock.lease_expires_at_ms
    nonce = None if got.replay_nonce is None else "a nonce"
    return got.status, lease, nonce, _record(got.current, tokens)


def _roles(prepared: Prepared, got: Acquisition | Exception) -> dict[str | None, str]:
    roles: dict[str | None, str] = {None: "none"}
    if prepared.lock is not None:
        roles[prepared.lock.token] = "the first holder's"
    if isinstance(got, Acquisition) and got.lock is not None:
        roles[got.lock.token] = "the acquirer's"
    return roles


FINISHES: list[ErrorInfo | None] = [None, RETRYABLE, PERMANENT, ErrorInfo("Released", "r", True)]


def test_every_state_answers_in_one_batch_as_the_single_calls_do(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    store = PostgresStore(pg_dsn, clock=clock)
    single: dict[str, Prepared] = {}
    batched: dict[str, Prepared] = {}
    for name, prepare in STATES.items():
        single[name] = prepare(store, pg_dsn, scope, _key())
        batched[name] = prepare(store, pg_dsn, scope, _key())
    clock.advance(5)  # the short leases end; the live ones do not

    by_one = {name: _single_acquire(store, _request(scope, p)) for name, p in single.items()}
    in_batch = dict(
        zip(
            batched, store.acquire_many([_request(scope, p) for p in batched.values()]), strict=True
        )
    )
    for name in STATES:
        one, many = by_one[name], in_batch[name]
        roles_one, roles_many = _roles(single[name], one), _roles(batched[name], many)
        assert _acquisition(many, roles_many) == _acquisition(one, roles_one), name
        after_one = store.get(scope, single[name].key)
        after_many = store.get(scope, batched[name].key)
        assert _record(after_many, roles_many) == _record(after_one, roles_one), name
    # Every outcome of the state machine came up (the states are what they claim to be).
    assert {a.status for a in in_batch.values() if isinstance(a, Acquisition)} == set(AcquireStatus)
    assert any(isinstance(a, Acquisition) and a.takeover for a in in_batch.values())
    assert any(isinstance(a, Acquisition) and a.retry for a in in_batch.values())

    # The acquired keys' outcomes: one `complete`/`fail` each, against ONE finish_many.
    acquired = [n for n, a in in_batch.items() if isinstance(a, Acquisition) and a.lock]
    outcomes = {name: FINISHES[i % len(FINISHES)] for i, name in enumerate(acquired)}
    written_one: dict[str, Any] = {}
    for name in acquired:
        one = by_one[name]
        assert isinstance(one, Acquisition)
        assert one.lock is not None
        error = outcomes[name]
        written_one[name] = (
            store.complete(one.lock, {"done": name})
            if error is None
            else store.fail(one.lock, error)
        )
    finishes = []
    for name in acquired:
        many = in_batch[name]
        assert isinstance(many, Acquisition)
        assert many.lock is not None
        finishes.append(Finish(many.lock, {"done": name}, outcomes[name]))
    written_many = dict(zip(acquired, store.finish_many(finishes), strict=True))
    for name in acquired:
        roles_one = _roles(single[name], by_one[name])
        roles_many = _roles(batched[name], in_batch[name])
        assert _write(written_many[name], roles_many) == _write(written_one[name], roles_one)
        after_one = store.get(scope, single[name].key)
        after_many = store.get(scope, batched[name].key)
        assert after_many is not None
        assert _record(after_many, roles_many) == _record(after_one, roles_one), name
        assert after_many.status is (Status.COMPLETED if outcomes[name] is None else Status.FAILED)
    assert {type(e) for e in outcomes.values()} == {type(None), ErrorInfo}


def _single_acquire(store: PostgresStore, request: AcquireRequest) -> Acquisition | Exception:
    return one_by_one.acquire_each(store, [request])[0]


# -- round trips, on the wire ----------------------------------------------------------------


@pytest.fixture
def proxied(pg_dsn: str) -> Iterator[tuple[RoundTripProxy, PostgresStore]]:
    """A store with one pooled connection through a round-trip counting proxy."""
    params = conninfo_to_dict(pg_dsn)
    with RoundTripProxy(str(params["host"]), int(str(params["port"]))) as proxy:
        dsn = proxy.dsn(str(params["dbname"]), str(params["user"]))
        with ConnectionPool(dsn, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
            pool.wait()
            yield proxy, PostgresStore(dsn, pool=pool)


def test_ten_new_keys_take_one_round_trip_to_acquire_and_one_to_finish(
    proxied: tuple[RoundTripProxy, PostgresStore], scope: str
) -> None:
    proxy, store = proxied
    keys = [_key() for _ in range(10)]
    with proxy.counting() as counter:
        got = store.acquire_many([AcquireRequest(scope, k, 30_000, "o") for k in keys])
    assert counter.snapshot() == {"acquire": 1}
    locks = [a.lock for a in got if isinstance(a, Acquisition) and a.lock is not None]
    assert len(locks) == 10
    finishes = [Finish(lock, {"i": i}) for i, lock in enumerate(locks[:7])]
    finishes += [Finish(lock, error=RETRYABLE) for lock in locks[7:9]]
    finishes += [Finish(locks[9], error=PERMANENT)]
    with proxy.counting() as counter:
        written = store.finish_many(finishes)
    assert counter.snapshot() == {"fenced write": 1}
    assert all(isinstance(w, WriteResult) and w.ok for w in written)
    statuses = [store.get(scope, k) for k in keys]
    assert [r.status if r else None for r in statuses] == [Status.COMPLETED] * 7 + [
        Status.FAILED
    ] * 3


def test_ten_duplicates_take_one_round_trip(
    proxied: tuple[RoundTripProxy, PostgresStore], scope: str
) -> None:
    proxy, store = proxied
    keys = [_key() for _ in range(10)]
    for key in keys:
        lock = _held(store, scope, key, 30_000)
        assert store.complete(lock, key).ok
    with proxy.counting() as counter:
        got = store.acquire_many(
            [AcquireRequest(scope, k, 30_000, "o", likely_taken=True) for k in keys]
        )
    assert counter.snapshot() == {"acquire": 1}
    for key, answer in zip(keys, got, strict=True):
        assert isinstance(answer, Acquisition)
        assert answer.status is AcquireStatus.ALREADY_COMPLETED
        assert answer.record is not None
        assert answer.record.result == key  # the stored result came back with the refusal


# -- what only a batch can get wrong ----------------------------------------------------------


def test_a_zombies_batch_is_refused_and_leaves_the_new_holders_untouched(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    store = PostgresStore(pg_dsn, clock=clock)
    keys = [_key() for _ in range(4)]
    zombies = store.acquire_many([AcquireRequest(scope, k, SHORT_MS, "zombie") for k in keys])
    clock.advance(5)
    takers = store.acquire_many([AcquireRequest(scope, k, LIVE_MS, "taker") for k in keys])
    assert all(isinstance(t, Acquisition) and t.takeover for t in takers)
    before = [store.get(scope, k) for k in keys]

    finishes = []
    for i, zombie in enumerate(zombies):
        assert isinstance(zombie, Acquisition)
        assert zombie.lock is not None
        finishes.append(
            Finish(zombie.lock, "late") if i % 2 else Finish(zombie.lock, error=RETRYABLE)
        )
    refused = store.finish_many(finishes)
    for answer, now in zip(refused, before, strict=True):
        assert isinstance(answer, WriteResult)
        assert answer.status.value == "lease_lost"
        assert answer.current == now  # who holds the key now, from the same statement
    assert [store.get(scope, k) for k in keys] == before  # untouched
    taken = [t.lock for t in takers if isinstance(t, Acquisition) and t.lock is not None]
    assert all(
        isinstance(w, WriteResult) and w.ok
        for w in store.finish_many([Finish(held, 1) for held in taken])
    )


def test_a_batch_that_waited_on_a_committing_holder_reports_its_outcome(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """The batch's refusing rows are their latest versions (FOR SHARE), not its snapshot's."""
    store = PostgresStore(pg_dsn, clock=clock)
    held, fresh = _key(), _key()
    lock = _held(store, scope, held, LIVE_MS)
    completing = psycopg.connect(pg_dsn)
    completing.execute(
        "UPDATE exactly_once.records SET status = 'COMPLETED' WHERE id = %s", (lock.record_id,)
    )
    got: dict[str, Any] = {}

    def batch() -> None:
        got["answers"] = store.acquire_many(
            [AcquireRequest(scope, k, 30_000, "second") for k in (held, fresh)]
        )

    racer = threading.Thread(target=batch)
    racer.start()

    def waiting_on_the_row() -> bool:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE '%%acquired_keys%%'"
            ).fetchone()
        return bool(row and row[0])

    wait_until(waiting_on_the_row, lambda: "the batch never waited on the row")
    completing.commit()
    completing.close()
    racer.join(timeout=60)
    first, second = got["answers"]
    assert isinstance(first, Acquisition)
    assert first.status is AcquireStatus.ALREADY_COMPLETED, first
    assert isinstance(second, Acquisition)
    assert second.status is AcquireStatus.ACQUIRED


def test_a_lent_transaction_handed_to_a_batch_commits_or_rolls_back_with_its_outcome(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """OnceLock.gathered keeps these out of batches; handed one anyway, the batch completes it
    in its own transaction (its business write commits) and fails the other (rolled back)."""
    store = PostgresStore(pg_dsn, clock=clock)
    table = business_table(pg_dsn)
    keys = [_key() for _ in range(3)]
    got = store.acquire_many([AcquireRequest(scope, k, LIVE_MS, "o") for k in keys])
    locks = [a.lock for a in got if isinstance(a, Acquisition) and a.lock is not None]
    for lock, payer in zip(locks[:2], ("kept", "rolled back"), strict=True):
        store.transaction(lock).execute(
            f"INSERT INTO {table} VALUES (%s, %s)",  # noqa: S608
            (lock.record_id, payer),
        )
    written = store.finish_many(
        [Finish(locks[0], "r"), Finish(locks[1], error=RETRYABLE), Finish(locks[2], "plain")]
    )
    assert all(isinstance(w, WriteResult) and w.ok for w in written)
    assert table_rows(pg_dsn, table) == [(locks[0].record_id, "kept")]
    statuses = [store.get(scope, k) for k in keys]
    assert [r.status if r else None for r in statuses] == [
        Status.COMPLETED,
        Status.FAILED,
        Status.COMPLETED,
    ]
    assert store._open == {}  # every lent connection went back


def _watched(store: PostgresStore) -> list[Exception]:
    """The errors the store's statements raise (a deadlock would be one: the batch then falls
    back key by key, so its answers alone could not show it)."""
    raised: list[Exception] = []
    run = store._run

    def watched(statement: Callable[[Any], Any]) -> Any:
        try:
            return run(statement)
        except Exception as exc:
            raised.append(exc)
            raise

    store._run = watched  # type: ignore[method-assign]
    return raised


def _race(threads: int, work: Callable[[int], None]) -> None:
    start = threading.Barrier(threads)

    def run(seed: int) -> None:
        start.wait()
        work(seed)

    running = [threading.Thread(target=run, args=(seed,)) for seed in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(timeout=120)


def test_batches_racing_for_overlapping_keys_acquire_each_key_exactly_once(
    pg_dsn: str, scope: str
) -> None:
    """Threads send batches over shuffled, overlapping keys; every key is acquired by exactly
    one, and no statement fails (rows are locked in id order: no deadlock between them)."""
    store = PostgresStore(pg_dsn)
    raised = _watched(store)
    keys = [_key() for _ in range(40)]
    answers: list[tuple[str, Acquisition | Exception]] = []
    lock = threading.Lock()

    def racer(seed: int) -> None:
        mine = random.Random(seed).sample(keys, 25)
        got = store.acquire_many([AcquireRequest(scope, k, LIVE_MS, f"r{seed}") for k in mine])
        with lock:
            answers.extend(zip(mine, got, strict=True))

    _race(8, racer)
    assert raised == []
    assert len(answers) == 8 * 25
    winners: dict[str, int] = {}
    for key, answer in answers:
        assert isinstance(answer, Acquisition), answer
        assert answer.status in (AcquireStatus.ACQUIRED, AcquireStatus.IN_PROGRESS)
        if answer.acquired:
            winners[key] = winners.get(key, 0) + 1
    asked = {key for key, _ in answers}
    assert winners == dict.fromkeys(asked, 1)


def test_zombies_finishing_while_batches_take_over_never_both_win_a_key(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """Expired holders complete their keys in batches while other batches take the same keys
    over, each in its own shuffled order: per key, either the zombie's completion or the
    takeover wins, never both, and no statement fails (both lock rows in id order)."""
    store = PostgresStore(pg_dsn, clock=clock)
    keys = [_key() for _ in range(40)]
    zombies = _locks(store.acquire_many([AcquireRequest(scope, k, SHORT_MS, "z") for k in keys]))
    clock.advance(5)
    raised = _watched(store)
    finished: dict[str, WriteResult | Exception] = {}
    taken: dict[str, list[Acquisition | Exception]] = {k: [] for k in keys}
    lock = threading.Lock()

    def racer(seed: int) -> None:
        order = random.Random(seed).sample(range(len(keys)), len(keys))
        if seed % 2:  # half the zombies each
            mine = [i for i in order if i % 2 == seed // 2 % 2]
            got = store.finish_many([Finish(zombies[i], "late") for i in mine])
            with lock:
                finished.update({keys[i]: w for i, w in zip(mine, got, strict=True)})
        else:
            asked = [AcquireRequest(scope, keys[i], LIVE_MS, f"t{seed}") for i in order]
            acquired = store.acquire_many(asked)
            with lock:
                for i, answer in zip(order, acquired, strict=True):
                    taken[keys[i]].append(answer)

    _race(4, racer)
    assert raised == []
    assert set(finished) == set(keys)
    for key in keys:
        zombie = finished[key]
        assert isinstance(zombie, WriteResult), zombie
        takers = [a for a in taken[key] if isinstance(a, Acquisition) and a.acquired]
        assert all(isinstance(a, Acquisition) for a in taken[key]), taken[key]
        assert zombie.ok + len(takers) == 1, (key, zombie, taken[key])
        record = store.get(scope, key)
        assert record is not None
        assert record.status is (Status.COMPLETED if zombie.ok else Status.IN_PROGRESS)


def _locks(answers: list[Acquisition | Exception]) -> list[Lock]:
    locks = []
    for answer in answers:
        assert isinstance(answer, Acquisition), answer
        assert answer.lock is not None, answer
        locks.append(answer.lock)
    return locks


def test_an_inherited_lock_in_a_batch_is_refused_alone(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """A fork child's copy of a lock raises LockInherited, as `complete` does, in its own
    place; the batch's other outcome is written."""
    store = PostgresStore(pg_dsn, clock=clock)
    keys = [_key(), _key()]
    mine, parents = _locks(
        store.acquire_many([AcquireRequest(scope, k, LIVE_MS, "o") for k in keys])
    )
    inherited = dataclasses.replace(parents, process="the parent process")
    answers = store.finish_many([Finish(mine, "r"), Finish(inherited, "r")])
    assert isinstance(answers[0], WriteResult)
    assert answers[0].ok
    assert isinstance(answers[1], LockInherited)
    records = [store.get(scope, k) for k in keys]
    assert [r.status if r else None for r in records] == [Status.COMPLETED, Status.IN_PROGRESS]


def test_a_batch_larger_than_one_statement_takes_one_round_trip_per_chunk(
    proxied: tuple[RoundTripProxy, PostgresStore], scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exactly_once.stores.postgres import batch_acquire, batch_finish

    monkeypatch.setattr(batch_acquire, "BATCH_ROWS", 3)
    monkeypatch.setattr(batch_finish, "BATCH_ROWS", 3)
    proxy, store = proxied
    keys = [_key() for _ in range(7)]
    with proxy.counting() as counter:
        locks = _locks(store.acquire_many([AcquireRequest(scope, k, 30_000, "o") for k in keys]))
    assert counter.snapshot() == {"acquire": 3}
    assert [lock.record_id.rsplit("#", 1)[-1] for lock in locks] == keys  # in the call's order
    with proxy.counting() as counter:
        written = store.finish_many([Finish(lock, i) for i, lock in enumerate(locks)])
    assert counter.snapshot() == {"fenced write": 3}
    assert all(isinstance(w, WriteResult) and w.ok for w in written)
    assert [r.result if r else None for r in (store.get(scope, k) for k in keys)] == list(range(7))
