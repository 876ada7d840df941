"""Adversarial review of the steps (issue 29): the paths the other step tests do not drive.

- PostgreSQL: a step whose own connection died while its fn ran (the fn caught the error and
  returned): its writes never committed, so its recovery point must not commit either; the
  step's connection goes back to its pool on every path (a KeyboardInterrupt inside fn, a
  malformed setting read at the commit).
- Both stores: a new generation through the batched acquire (`acquire_many`) starts with no
  steps; a lost step reply retried after a takeover is LeaseLost, never OK.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from exactly_once import begin
from exactly_once.errors import CommitFailed, CommitUnknown
from exactly_once.steps.step import Step
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.store import PostgresStore
from tests.conftest import FakeClock

LEASE_S = 10


@pytest.fixture
def own_pool_store(pg_dsn: str, clock: FakeClock) -> Iterator[PostgresStore]:
    """A PostgreSQL store whose transaction and step pools are its own (the process's are
    shared by every store on the same DSN), so that their connections can be counted."""
    pools = [connections.new_pool(pg_dsn, connections.TRANSACTIONS)]
    pools.append(connections.new_pool(pg_dsn, connections.STEPS))
    try:
        yield PostgresStore(pg_dsn, clock=clock, transaction_pool=pools[0], step_pool=pools[1])
    finally:
        for pool in pools:
            pool.close()


def _ledger_rows(dsn: str, scope: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT sk FROM exactly_once.ledger WHERE pk = %s ORDER BY sk", (scope,)
        ).fetchall()
    return [row[0] for row in rows]


def _insert(conn: Any, scope: str, sk: str, fence: int) -> None:
    conn.execute(
        "INSERT INTO exactly_once.ledger (pk, sk, fence, message_id, detail, written_at_ms) "
        "VALUES (%s, %s, %s, 'm', 'd', 0)",
        (scope, sk, fence),
    )


def test_pg_a_step_whose_connection_died_under_fn_records_no_point(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """fn writes in step.transaction, its backend is killed, fn catches the error of its next
    statement and returns: the write is gone, so the step must not be recorded as done."""
    store = PostgresStore(pg_dsn, clock=clock)
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None

    def fn(step: Step) -> str:
        conn = step.transaction
        _insert(conn, scope, "charge", step.fence)
        pid = conn.info.backend_pid
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with contextlib.suppress(psycopg.OperationalError):  # a careless fn swallows it
            conn.execute("SELECT 1")
        return "charged"

    outcome: Any
    try:
        outcome = holder.step("charge", fn)
    except (CommitFailed, CommitUnknown, psycopg.Error) as error:
        outcome = error
    record = store.get_by_id(f"{scope}#k")
    assert record is not None
    written = _ledger_rows(pg_dsn, scope)
    # Either both the write and the point, or neither.
    assert (1 in record.steps) == ("charge" in written), (outcome, record.steps, written)


def _pool_idle(store: PostgresStore) -> tuple[int, int]:
    """(connections the transaction and step pools hold, of them idle there): equal when
    none is out."""
    size = idle = 0
    for pool in (store.transaction_pool, store.step_pool):
        stats = pool.get_stats()
        size += stats.get("pool_size", 0)
        idle += stats.get("pool_available", 0)
    return size, idle


@pytest.mark.parametrize("wrote", [True, False], ids=["step-transaction", "no-writes"])
def test_pg_a_malformed_setting_at_the_step_commit_gives_its_connection_back(
    own_pool_store: PostgresStore,
    pg_dsn: str,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
    wrote: bool,
) -> None:
    """Behind RDS Proxy (IDEMPOTENCY_PG_SESSION_SETTINGS=server) the statement timeout is first
    read by the step's commit; a malformed one must not keep the step's connection, already
    taken from the open ones, out of its pool (the completion's commit gives it back:
    transactions._complete_in reads the settings inside its try for that reason)."""
    from exactly_once.errors import ConfigurationError

    monkeypatch.setenv("IDEMPOTENCY_PG_SESSION_SETTINGS", "server")
    store = own_pool_store
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None

    def fn(step: Step) -> str:
        if wrote:
            _insert(step.transaction, scope, "charge", step.fence)
        monkeypatch.setenv("IDEMPOTENCY_PG_STATEMENT_TIMEOUT_MS", "soon")
        return "charged"

    with pytest.raises((ConfigurationError, CommitFailed)):
        holder.step("charge", fn)
    monkeypatch.delenv("IDEMPOTENCY_PG_STATEMENT_TIMEOUT_MS")
    size, idle = _pool_idle(store)
    assert size == idle, f"{size - idle} connection(s) kept out of the transaction pool"
    assert _ledger_rows(pg_dsn, scope) == []
    record = store.get_by_id(f"{scope}#k")
    assert record is not None
    assert record.steps == {}


def test_pg_a_keyboard_interrupt_inside_fn_gives_the_steps_connection_back(
    own_pool_store: PostgresStore, pg_dsn: str, scope: str
) -> None:
    store = own_pool_store
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None

    def fn(step: Step) -> str:
        _insert(step.transaction, scope, "charge", step.fence)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        holder.step("charge", fn)
    size, idle = _pool_idle(store)
    assert size == idle, f"{size - idle} connection(s) kept out of the transaction pool"
    assert _ledger_rows(pg_dsn, scope) == []
    # The same holder goes on: the step runs again, in a fresh transaction, and commits.
    assert holder.step("charge", lambda step: _insert(step.transaction, scope, "c2", 1)) is None
    assert _ledger_rows(pg_dsn, scope) == ["c2"]
    size, idle = _pool_idle(store)
    assert size == idle


def _held_in_parallel(
    store: PostgresStore, scope: str, holders: int, step: Any
) -> list[BaseException | str]:
    """`holders` keys held at once (as a batch runs its records: BATCH_CONCURRENCY), each with
    its ctx.transaction open, then each running one step `step(holder)`."""
    locks = [begin(scope, f"k{i}", store=store, lease_s=LEASE_S).lock for i in range(holders)]
    for lock in locks:
        assert lock is not None
        _insert(lock.transaction, scope, f"effect-{lock.key}", lock.fence)
    ready = threading.Barrier(holders)
    answers: list[BaseException | str] = ["" for _ in locks]

    def run(i: int) -> None:
        ready.wait()
        try:
            answers[i] = str(step(locks[i]))
            locks[i].succeed("done")
        except BaseException as error:  # reported, not raised in the thread
            answers[i] = error
            locks[i].abandon()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(holders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


@pytest.fixture
def small_pool_store(
    pg_dsn: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PostgresStore]:
    """A store whose pools hold 2 connections each and wait 1 s for one: the default's shape
    (IDEMPOTENCY_PG_POOL_MAX = BATCH_CONCURRENCY = 10) made small."""
    monkeypatch.setenv("IDEMPOTENCY_PG_POOL_MAX", "2")
    monkeypatch.setenv("IDEMPOTENCY_PG_POOL_WAIT_S", "1")
    pools = [connections.new_pool(pg_dsn, connections.TRANSACTIONS)]
    pools.append(connections.new_pool(pg_dsn, connections.STEPS))
    try:
        yield PostgresStore(pg_dsn, clock=clock, transaction_pool=pools[0], step_pool=pools[1])
    finally:
        for pool in pools:
            pool.close()


@pytest.mark.parametrize("wrote", [False, True], ids=["no-writes", "step-transaction"])
def test_pg_holders_with_open_transactions_as_many_as_the_pool_still_run_a_step(
    small_pool_store: PostgresStore, scope: str, wrote: bool
) -> None:
    """A batch's records run BATCH_CONCURRENCY at a time, and the transaction pool is sized
    for one connection each (connections.new_pool): a step, which needs a connection of its
    own while its holder's transaction stays open, must not wait for its neighbours'."""

    def fn(step: Step) -> str:
        if wrote:
            _insert(step.transaction, scope, f"step-{step.key}", step.fence)
        return "sent"

    answers = _held_in_parallel(small_pool_store, scope, 2, lambda lock: lock.step("notify", fn))
    assert answers == ["sent", "sent"]


# -- a new generation through the batched acquire --------------------------------------------

TTL_S = 120


@pytest.mark.parametrize("likely_taken", [False, True], ids=["insert-first", "update-first"])
@pytest.mark.parametrize("finished", [True, False], ids=["completed", "abandoned"])
def test_a_new_generation_through_acquire_many_starts_with_no_steps(
    make_store: Any, scope: str, clock: FakeClock, likely_taken: bool, finished: bool
) -> None:
    """The record's TTL passed (COMPLETED, or its holder died mid-steps) and a batch takes the
    key again (`acquire_many`, DynamoDB's PartiQL INSERT/UPDATE or PostgreSQL's ACQUIRE_MANY):
    the new generation has no steps of the old one, and its step runs."""
    from exactly_once.held_lock import OnceLock
    from exactly_once.stores.records import AcquireRequest

    store = make_store(record_ttl_s=TTL_S)
    first = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert first is not None
    assert first.step("charge", lambda step: "old") == "old"
    assert first.step("ship", lambda step: "old-ship") == "old-ship"
    if finished:
        first.succeed("done")
    clock.advance(TTL_S + LEASE_S + 61)
    [taken] = store.acquire_many(
        [AcquireRequest(scope, "k", LEASE_S * 1000, "batch", likely_taken=likely_taken)]
    )
    assert not isinstance(taken, Exception), taken
    assert taken.lock is not None, taken
    record = store.get_by_id(taken.lock.record_id)
    assert record is not None
    assert record.steps == {}, "the old generation's steps leaked into the new one"
    holder = OnceLock(store, taken.lock, "k", "batch")
    assert holder.step("charge", lambda step: "new") == "new"


# -- DynamoDB: a lost reply whose retry meets a takeover ---------------------------------------


@pytest.mark.parametrize("applied", [True, False], ids=["applied", "not-applied"])
@pytest.mark.parametrize("writes", [False, True], ids=["update-item", "transact"])
def test_ddb_a_lost_step_reply_retried_after_a_takeover(
    dynamodb_local: Any,
    idempotency_table: str,
    ddb: Any,
    ledger_table: str,
    scope: str,
    clock: FakeClock,
    applied: bool,
    writes: bool,
) -> None:
    """The step's write is sent (applied or not), its reply lost, and before botocore's retry
    the key is taken over. Not applied: the retry must be LeaseLost and nothing of the step
    written. Applied: the point committed under the holder's fence, so OK (DynamoDB's
    ClientRequestToken answers a TransactWriteItems retry idempotently) or LeaseLost; never a
    second write, and the successor gets the result back without running fn."""
    from botocore.httpsession import URLLib3Session

    from exactly_once.effects import LeaseLost
    from exactly_once.stores.dynamodb.store import IdempotencyStore
    from fault_injection.throttling import error_response
    from tests.conftest import make_ddb_client

    other = IdempotencyStore(idempotency_table, client=ddb, clock=clock)
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    session = URLLib3Session()
    successor: list[Any] = []

    def before_send(request: Any, event_name: str = "", **_: Any) -> Any:
        operation = event_name.rsplit(".", 1)[-1]
        body = bytes(request.body or b"")
        if successor or operation not in ("UpdateItem", "TransactWriteItems"):
            return None
        if b"step#" not in body:
            return None
        if applied:
            session.send(request)
        clock.advance(LEASE_S + 1)
        successor.append(begin(scope, "k", store=other, lease_s=LEASE_S).lock)
        return error_response(str(request.url), 500, b'{"__type": "InternalServerError"}')

    client.meta.events.register("before-send.dynamodb", before_send)
    store = IdempotencyStore(idempotency_table, client=client, clock=clock)
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None
    ran: list[int] = []

    def fn(step: Step) -> str:
        ran.append(step.fence)
        if writes:
            step.put(
                ledger_table,
                {"pk": {"S": f"{scope}#k"}, "sk": {"S": "charge"}},
                new_only=("pk", "sk"),
            )
        return "charged"

    answer: Any
    try:
        answer = holder.step("charge", fn)
    except LeaseLost as lost:
        answer = lost
    assert successor, "the fault never met the step's write"
    record = other.get_by_id(f"{scope}#k")
    assert record is not None
    if not applied:
        assert isinstance(answer, LeaseLost), answer
        assert record.steps == {}
    else:
        assert answer == "charged" or isinstance(answer, LeaseLost), answer
        assert record.steps[1].fence == holder.fence
    # The successor: the old point back without running fn, or fn once when none committed.
    assert successor[0].step("charge", fn) == "charged"
    assert ran == [holder.fence] if applied else [holder.fence, successor[0].fence]
    if writes:
        items = ddb.query(
            TableName=ledger_table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": f"{scope}#k"}},
        )["Items"]
        assert len(items) == 1


# -- DynamoDB: steps that fill the 400 KB item ---------------------------------------------------


def test_ddb_a_holder_whose_steps_filled_the_item_still_completes(
    ddb: Any, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    """Six steps each under the 64 KB cap, then a result under the cap (each write accepted on
    its own): the completion must be recorded (the result kept, or its hash alone as for an
    over-cap result), not fail on the item's size."""
    from exactly_once.stores.dynamodb.store import IdempotencyStore
    from exactly_once.stores.schema import Status

    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock)
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None
    near_cap = "x" * (store.result_cap_bytes - 2_000)
    for i in range(6):
        assert holder.step(f"s{i}", lambda step: near_cap) == near_cap
    holder.succeed("y" * (store.result_cap_bytes - 4_000))
    record = store.get_by_id(f"{scope}#k")
    assert record is not None
    assert record.status is Status.COMPLETED


# -- the completer and keys kept in another form -------------------------------------------------

ODD_KEYS = {
    "nul": "order\x001",
    "long": "o" * 1500,
    "looks-hashed": "sha256:not-a-digest",
    "lone-surrogate": "order-\ud800",
}


@pytest.mark.parametrize("kind", list(ODD_KEYS))
def test_the_completer_resumes_an_odd_key_with_the_same_step_keys(
    store: Any, scope: str, clock: FakeClock, kind: str
) -> None:
    """A key stored in another form (hashed: too long, not UTF-8, `sha256:`-like; on
    PostgreSQL also a NUL) whose run failed in its second step after calling the provider: the
    completer finishes it, passing the provider the same step idempotency key the first
    holder did (else the provider acts twice), and does not run the first step again."""
    from exactly_once.steps.completer import Completer
    from exactly_once.steps.resumable import Resumable

    key = ODD_KEYS[kind]
    sent: list[tuple[str, str]] = []  # (step, idempotency key) of every provider call
    down = [True]

    def checkout(lock: Any, order: dict[str, Any]) -> str:
        def call(step: Step) -> str:
            sent.append((step.name, step.idempotency_key))
            if step.name == "email" and down[0]:
                raise RuntimeError("the provider's reply never came")
            return f"{step.name}-ok"

        lock.step("charge", call)
        return str(lock.step("email", call))

    resumable: Resumable[dict[str, Any], str] = Resumable(
        scope, checkout, {"store": store, "lease_s": LEASE_S}
    )
    with pytest.raises(RuntimeError):
        resumable.run(key, {"id": 1})
    down[0] = False
    clock.advance(LEASE_S + 1)
    report = Completer([resumable], store=store).run(log=False)
    assert [o.outcome for o in report.outcomes] == ["completed"], report.outcomes
    assert [name for name, _ in sent] == ["charge", "email", "email"]
    assert sent[1][1] == sent[2][1], "the completer passed the provider another step key"
    assert resumable.run(key, {"id": 1}) == "email-ok"


@pytest.mark.parametrize("likely_taken", [False, True], ids=["insert-first", "update-first"])
@pytest.mark.parametrize("how", ["takeover", "retry"])
def test_steps_survive_a_takeover_or_retry_through_acquire_many(
    make_store: Any, scope: str, clock: FakeClock, likely_taken: bool, how: str
) -> None:
    """The same generation taken again by a batch (its holder's lease ended, or it failed
    retryably): the finished step comes back without running, with the same step key."""
    from exactly_once.held_lock import OnceLock
    from exactly_once.stores.records import AcquireRequest

    store = make_store(record_ttl_s=TTL_S)
    first = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert first is not None
    keys: list[str] = []

    def charge(tag: str) -> Any:
        def fn(step: Step) -> str:
            keys.append(step.idempotency_key)
            return tag

        return fn

    def dies(step: Step) -> str:
        keys.append(step.idempotency_key)
        raise RuntimeError("the provider's reply never came")

    assert first.step("charge", charge("first")) == "first"
    with pytest.raises(RuntimeError):
        first.step("ship", dies)
    if how == "retry":
        first.fail(RuntimeError("the provider is down"), retryable=True)
    else:
        clock.advance(LEASE_S + 1)
    [taken] = store.acquire_many(
        [AcquireRequest(scope, "k", LEASE_S * 1000, "batch", likely_taken=likely_taken)]
    )
    assert not isinstance(taken, Exception), taken
    assert taken.lock is not None, taken
    holder = OnceLock(store, taken.lock, "k", "batch")
    assert holder.step("charge", charge("second")) == "first"
    assert holder.step("ship", charge("shipped")) == "shipped"
    assert keys[1] == keys[2], "the step's key changed across the batch's takeover"


# -- a Step used after its fn returned -------------------------------------------------------------


def test_pg_a_steps_transaction_asked_for_after_the_step_is_refused(
    own_pool_store: PostgresStore, pg_dsn: str, scope: str
) -> None:
    """A `step` kept past its fn (a closure called later): its transaction would be a new one
    that no step commits (its writes ride on the next step's point, or on none, and its
    connection never goes back to the pool). It is refused once the step has finished."""
    store = own_pool_store
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None
    kept: list[Step] = []
    holder.step("charge", lambda step: kept.append(step))
    with pytest.raises(RuntimeError):
        _insert(kept[0].transaction, scope, "late", holder.fence)
    holder.succeed("done")
    assert _ledger_rows(pg_dsn, scope) == []
    size, idle = _pool_idle(store)
    assert size == idle, f"{size - idle} connection(s) kept out of the transaction pool"


def test_ddb_a_write_added_after_the_step_is_refused_not_dropped(
    ddb: Any, idempotency_table: str, ledger_table: str, scope: str, clock: FakeClock
) -> None:
    """`step.put` on a step whose fn returned was appended to a list nobody sends: the write
    was silently dropped. It is refused."""
    from exactly_once.stores.dynamodb.store import IdempotencyStore

    store = IdempotencyStore(idempotency_table, client=ddb, clock=clock)
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None
    kept: list[Step] = []
    holder.step("charge", lambda step: kept.append(step))
    with pytest.raises(RuntimeError):
        kept[0].put(ledger_table, {"pk": {"S": scope}, "sk": {"S": "late"}})


def test_the_completer_takes_one_resumable_named_twice(
    store: Any, scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RESUMABLE_MODULES="app.checkout,app" where `app` re-exports checkout's resumable names
    the same function twice: the scheduled completer must run, not refuse it as two resumables
    of one scope (two different functions of one scope stay refused)."""
    from exactly_once.steps.completer import Completer
    from exactly_once.steps.resumable import Resumable

    checkout: Resumable[Any, Any] = Resumable(scope, lambda lock, order: order, {"store": store})
    Completer([checkout, checkout], store=store)
    other: Resumable[Any, Any] = Resumable(scope, lambda lock, order: None, {"store": store})
    with pytest.raises(ValueError, match="two resumables of one scope"):
        Completer([checkout, other], store=store)
