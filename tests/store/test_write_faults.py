"""Every write of the store under each fault, one matrix: write x (lost reply, throttle, crash).

- lost reply: DynamoDB applies the write, the reply is lost and botocore retries it; the retry
  meets the write's own result and must report success;
- throttle: every attempt is throttled, so the call raises having written nothing, and doing it
  again later succeeds;
- crash: the write is applied and its caller dies before acting on it; the next holder or
  delivery must find a safe state once the clock has passed the lease.

Faults go through botocore's `before-send` hook on a client of the test's own, against
DynamoDB Local. The stateful test (test_model.py) interleaves the same faults at random.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError
from botocore.httpsession import URLLib3Session

from exactly_once import AcquireStatus, ErrorInfo, IdempotencyStore, RecordContext, Status
from exactly_once.effects import put_once
from exactly_once.stores import schema
from exactly_once.stores.records import AcquireRequest, Finish, Lock
from fault_injection.throttling import error_response, throttle_response
from tests.conftest import FakeClock, make_ddb_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

LEASE_MS = 30_000
TTL_S = 3600
KEY = "k"
ATTEMPTS = 2  # botocore attempts per call


@dataclass
class Fault:
    """Hits the `skip`+1-th request of `operation` (retries included), as `kind` says."""

    kind: str  # "lost" | "throttle"
    operation: str
    skip: int = 0
    seen: int = 0
    hits: list[str] = field(default_factory=list)

    def install(self, client: DynamoDBClient) -> None:
        session = URLLib3Session()

        def before_send(request: Any, event_name: str = "", **_: Any) -> Any:
            if event_name.rsplit(".", 1)[-1] != self.operation:
                return None
            self.seen += 1
            if self.seen <= self.skip or (self.kind == "lost" and self.hits):
                return None
            self.hits.append(self.kind)
            if self.kind == "throttle":
                return throttle_response(str(request.url))
            session.send(request)  # applied; the reply never arrives
            return error_response(str(request.url), 500, b'{"__type": "InternalServerError"}')

        client.meta.events.register("before-send.dynamodb", before_send)


@dataclass
class World:
    healthy: IdempotencyStore
    faulty: IdempotencyStore
    clock: FakeClock
    scope: str
    ddb: DynamoDBClient
    effects: str

    def item(self) -> dict[str, Any]:
        got = self.ddb.get_item(
            TableName=self.healthy.table_name,
            Key={"id": {"S": schema.record_id(self.scope, KEY)}},
            ConsistentRead=True,
        )
        return dict(got.get("Item", {}))

    def acquire(self, store: IdempotencyStore, **kwargs: Any) -> Any:
        kwargs.setdefault("lease_ms", LEASE_MS)
        kwargs.setdefault("owner", "holder")
        return store.acquire(self.scope, KEY, **kwargs)

    def held(self) -> Lock:
        lock: Lock | None = self.acquire(self.healthy).lock
        assert lock is not None
        return lock

    def after_lease(self) -> None:
        self.clock.advance(LEASE_MS / 1000 + 1)

    def effect(self, store: IdempotencyStore, lock: Lock) -> bool:
        ctx = RecordContext("m", KEY, lock.fence, lock.attempt, {}, None, store, lock)
        return put_once(ctx, self.effects, {"pk": {"S": self.scope}, "sk": {"S": KEY}})


@dataclass(frozen=True)
class Case:
    """One write: how to reach it, do it, tell it succeeded, and recover after a crash."""

    operation: str
    skip: int  # requests of that operation before the write itself (a refused acquire)
    prepare: Callable[[World], Any]
    write: Callable[[World, IdempotencyStore, Any], Any]
    succeeded: Callable[[World, Any, Any], None]
    after_crash: Callable[[World, Any], None]


def _new_lock_is_held(w: World, _: Any, got: Any) -> None:
    assert got.status is AcquireStatus.ACQUIRED
    assert w.item()[schema.LOCK_TOKEN]["S"] == got.lock.token


def _taken_over_after_the_lease(w: World, _: Any) -> None:
    w.after_lease()
    got = w.acquire(w.healthy, owner="next")
    assert got.status is AcquireStatus.ACQUIRED
    assert got.takeover


def _expired_completed(w: World) -> Lock:
    lock = w.held()
    assert w.healthy.complete(lock, "old").ok
    w.clock.advance(TTL_S + 120)
    return lock


def _renewed(w: World, old: Lock, got: Any) -> None:
    _new_lock_is_held(w, old, got)
    assert got.lock.fence > old.fence
    assert w.item()[schema.ATTEMPTS]["N"] == "1"


def _died_holding(w: World) -> Lock:
    lock = w.held()
    w.after_lease()
    return lock


def _blocked(w: World, _: Any, got: Any) -> None:
    assert got.status is AcquireStatus.FAILED_PERMANENTLY
    assert got.record.replay_nonce == w.item()[schema.REPLAY_NONCE]["S"]


def _still_blocked_with_its_nonce(w: World, _: Any) -> None:
    nonce = w.item()[schema.REPLAY_NONCE]["S"]
    again = w.acquire(w.healthy, block_takeover=True)
    assert again.status is AcquireStatus.FAILED_PERMANENTLY
    assert again.record.replay_nonce == nonce  # the next DLQ copy carries the same nonce


def _completed(w: World, _: Any, written: Any) -> None:
    assert written.ok
    assert w.item()[schema.STATUS]["S"] == Status.COMPLETED


def _duplicate_afterwards(w: World, _: Any) -> None:
    w.after_lease()
    assert w.acquire(w.healthy).status is AcquireStatus.ALREADY_COMPLETED


def _failed_with_nonce(w: World, _: Any, written: Any) -> None:
    assert written.ok
    assert written.replay_nonce == w.item()[schema.REPLAY_NONCE]["S"]


def _extended(w: World, _: Any, written: Any) -> None:
    assert written.ok
    assert int(w.item()[schema.LEASE_EXPIRES_AT]["N"]) == written.lock.lease_expires_at_ms


def _held_through_the_extension(w: World, _: Any) -> None:
    w.after_lease()  # past the first lease, inside the extended one
    assert w.acquire(w.healthy, owner="thief").status is AcquireStatus.IN_PROGRESS
    w.clock.advance(3 * LEASE_MS / 1000)
    assert w.acquire(w.healthy, owner="next").acquired


def _effect_applied(w: World, _: Any, applied: Any) -> None:
    assert applied is True


def _takeover_skips_the_effect(w: World, _: Any) -> None:
    w.after_lease()
    lock = w.held()
    assert w.effect(w.healthy, lock) is False


def _held_by_an_execution(w: World) -> Lock:
    lock: Lock | None = w.acquire(w.healthy, resume_id="e1").lock
    assert lock is not None
    return lock


def _resumed(w: World, first: Lock, got: Any) -> None:
    """The replay holds the lock (the stored token and fence are its own, even when its
    request was applied twice), and the first invocation is fenced out."""
    _new_lock_is_held(w, first, got)
    assert got.resumed
    assert int(w.item()[schema.FENCE]["N"]) == got.lock.fence > first.fence
    assert w.healthy.complete(first, "zombie").ok is False


CASES = {
    "resume": Case(
        "UpdateItem",
        0,
        _held_by_an_execution,
        lambda w, store, _: w.acquire(store, resume_id="e1"),
        _resumed,
        _taken_over_after_the_lease,
    ),
    "acquire": Case(
        "UpdateItem",
        0,
        lambda w: None,
        lambda w, store, _: w.acquire(store),
        _new_lock_is_held,
        _taken_over_after_the_lease,
    ),
    "renew-expired": Case(
        "PutItem",
        0,
        _expired_completed,
        lambda w, store, _: w.acquire(store),
        _renewed,
        _taken_over_after_the_lease,
    ),
    "block": Case(
        "UpdateItem",
        1,
        _died_holding,
        lambda w, store, _: w.acquire(store, block_takeover=True),
        _blocked,
        _still_blocked_with_its_nonce,
    ),
    "complete": Case(
        "UpdateItem",
        0,
        lambda w: w.held(),
        lambda w, store, lock: store.complete(lock, {"ok": True}),
        _completed,
        _duplicate_afterwards,
    ),
    "fail-permanent": Case(
        "UpdateItem",
        0,
        lambda w: w.held(),
        lambda w, store, lock: store.fail(lock, ErrorInfo("Declined", "cut \ud83d", False)),
        _failed_with_nonce,
        _still_blocked_with_its_nonce,
    ),
    "extend": Case(
        "UpdateItem",
        0,
        lambda w: w.held(),
        lambda w, store, lock: store.extend(lock, 3 * LEASE_MS),
        _extended,
        _held_through_the_extension,
    ),
    "fenced-effect": Case(
        "TransactWriteItems",
        0,
        lambda w: w.held(),
        lambda w, store, lock: w.effect(store, lock),
        _effect_applied,
        _takeover_skips_the_effect,
    ),
}


@pytest.fixture
def world(
    dynamodb_local: DynamoDBLocal,
    ddb: DynamoDBClient,
    idempotency_table: str,
    ledger_table: str,
    scope: str,
    clock: FakeClock,
) -> World:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=ATTEMPTS)
    faulty = IdempotencyStore(idempotency_table, client=client, clock=clock, record_ttl_s=TTL_S)
    healthy = IdempotencyStore(idempotency_table, client=ddb, clock=clock, record_ttl_s=TTL_S)
    return World(healthy, faulty, clock, scope, ddb, ledger_table)


def _arm(world: World, case: Case, kind: str) -> Fault:
    fault = Fault(kind, case.operation, skip=case.skip)
    fault.install(world.faulty.client)
    return fault


@pytest.mark.parametrize("name", CASES)
def test_a_lost_reply_is_recognised_as_the_writes_own_success(world: World, name: str) -> None:
    case = CASES[name]
    state = case.prepare(world)
    fault = _arm(world, case, "lost")
    result = case.write(world, world.faulty, state)
    assert fault.hits == ["lost"]  # the write was applied, its reply lost and retried
    case.succeeded(world, state, result)


@pytest.mark.parametrize("name", CASES)
def test_a_throttle_past_the_retries_writes_nothing_and_a_later_try_succeeds(
    world: World, name: str
) -> None:
    case = CASES[name]
    state = case.prepare(world)
    before = world.item()
    fault = _arm(world, case, "throttle")
    with pytest.raises(ClientError):
        case.write(world, world.faulty, state)
    assert fault.hits == ["throttle"] * ATTEMPTS  # every attempt botocore made
    assert world.item() == before
    case.succeeded(world, state, case.write(world, world.healthy, state))


@pytest.mark.parametrize("name", CASES)
def test_a_crash_just_after_the_write_leaves_a_safe_state(world: World, name: str) -> None:
    case = CASES[name]
    state = case.prepare(world)
    case.write(world, world.healthy, state)  # applied; its caller dies before acting on it
    case.after_crash(world, state)


# -- the batched path (stores/dynamodb/batched.py): each of its writes under the same faults ---
#
# A batch never raises for a key: a call that fails whole past botocore's retries sends each
# key to its single call (same token), so the throttle case ends in success, not in an error.

BATCH = "BatchExecuteStatement"


def _one_acquired(store: IdempotencyStore, ask: AcquireRequest) -> Any:
    answer = store.acquire_many([ask])[0]
    assert not isinstance(answer, Exception), answer
    return answer


def _one_finished(store: IdempotencyStore, finish: Finish) -> Any:
    answer = store.finish_many([finish])[0]
    assert not isinstance(answer, Exception), answer
    return answer


def _failed_retryably(w: World) -> Lock:
    lock = w.held()
    assert w.healthy.fail(lock, ErrorInfo("Boom", "again", True)).ok
    return lock


def _retried(w: World, old: Lock, got: Any) -> None:
    _new_lock_is_held(w, old, got)
    assert got.lock.fence == old.fence + 1
    assert got.lock.attempt == 2


def _asked(w: World, likely_taken: bool) -> AcquireRequest:
    return AcquireRequest(w.scope, KEY, LEASE_MS, "holder", likely_taken=likely_taken)


BATCH_CASES = {
    "acquire-many-new": Case(
        BATCH,
        0,
        lambda w: None,
        lambda w, store, _: _one_acquired(store, _asked(w, False)),
        _new_lock_is_held,
        _taken_over_after_the_lease,
    ),
    "acquire-many-wrongly-hinted": Case(  # the fault hits the second call, the INSERT
        BATCH,
        1,
        lambda w: None,
        lambda w, store, _: _one_acquired(store, _asked(w, True)),
        _new_lock_is_held,
        _taken_over_after_the_lease,
    ),
    "acquire-many-retry": Case(
        BATCH,
        0,
        _failed_retryably,
        lambda w, store, _: _one_acquired(store, _asked(w, True)),
        _retried,
        _taken_over_after_the_lease,
    ),
    "complete-many": Case(
        BATCH,
        0,
        lambda w: w.held(),
        lambda w, store, lock: _one_finished(store, Finish(lock, {"ok": True})),
        _completed,
        _duplicate_afterwards,
    ),
    "fail-many-permanent": Case(
        BATCH,
        0,
        lambda w: w.held(),
        lambda w, store, lock: _one_finished(
            store, Finish(lock, None, ErrorInfo("Declined", "cut \ud83d", False))
        ),
        _failed_with_nonce,
        _still_blocked_with_its_nonce,
    ),
}


@pytest.mark.parametrize("name", BATCH_CASES)
def test_a_lost_batch_reply_is_recognised_as_the_writes_own_success(
    world: World, name: str
) -> None:
    case = BATCH_CASES[name]
    state = case.prepare(world)
    fault = _arm(world, case, "lost")
    result = case.write(world, world.faulty, state)
    assert fault.hits == ["lost"]
    case.succeeded(world, state, result)


@pytest.mark.parametrize("name", BATCH_CASES)
def test_a_batch_throttled_past_the_retries_falls_back_to_the_single_write(
    world: World, name: str
) -> None:
    case = BATCH_CASES[name]
    state = case.prepare(world)
    fault = _arm(world, case, "throttle")
    result = case.write(world, world.faulty, state)
    assert fault.hits == ["throttle"] * ATTEMPTS
    case.succeeded(world, state, result)


@pytest.mark.parametrize("name", BATCH_CASES)
def test_a_crash_just_after_a_batch_write_leaves_a_safe_state(world: World, name: str) -> None:
    case = BATCH_CASES[name]
    state = case.prepare(world)
    case.write(world, world.healthy, state)
    case.after_crash(world, state)
