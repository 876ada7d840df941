"""The DynamoDB store's batched path (stores/dynamodb/batched.py) against DynamoDB Local.

Held to the one-by-one path: for every state a record can be in, `acquire_many` answers what
`acquire` answers and leaves the same item behind; its request counts are the point of it (one
BatchExecuteStatement for a batch of new keys, one for duplicates, two for wrong hints); and
every fault falls back to the single call with the same token, which recognises its own write.
Faults go through botocore hooks on a client of the test's own, as in test_write_faults.py.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pytest
from botocore.httpsession import URLLib3Session

from exactly_once.errors import LockInherited
from exactly_once.stores import one_by_one, schema
from exactly_once.stores.dynamodb import clock_skew
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.records import (
    AcquireRequest,
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Finish,
    Lock,
    StoredRecord,
    WriteResult,
    WriteStatus,
)
from exactly_once.stores.schema import Status
from fault_injection.throttling import error_response, throttle_response
from tests.conftest import FakeClock, make_ddb_client
from tests.store.test_write_faults import Fault

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

LEASE_MS = 30_000
TTL_S = 3600
ATTEMPTS = 2  # botocore attempts per call on the faulty client
BATCH = "BatchExecuteStatement"


def _operations(client: DynamoDBClient) -> Counter[str]:
    """Every request the client sends (retries included), by operation."""
    sent: Counter[str] = Counter()

    def count(event_name: str = "", **_: Any) -> None:
        sent[event_name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-send.dynamodb", count)
    return sent


@dataclass
class Stores:
    """A healthy store to set records up with, and the store under test on a client of its
    own (counted, and where faults are installed)."""

    healthy: IdempotencyStore
    batched: IdempotencyStore
    clock: FakeClock
    ddb: DynamoDBClient
    sent: Counter[str] = field(default_factory=Counter)

    def item(self, scope: str, key: str) -> dict[str, Any]:
        got = self.ddb.get_item(
            TableName=self.healthy.table_name,
            Key={schema.PARTITION_KEY: {"S": schema.record_id(scope, key)}},
            ConsistentRead=True,
        )
        return dict(got.get("Item", {}))

    def hold(self, scope: str, key: str, **kwargs: Any) -> Lock:
        lock = self.healthy.acquire(scope, key, lease_ms=LEASE_MS, owner="first", **kwargs).lock
        assert lock is not None
        return lock


@pytest.fixture
def stores(
    dynamodb_local: DynamoDBLocal, ddb: DynamoDBClient, idempotency_table: str, clock: FakeClock
) -> Stores:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=ATTEMPTS)
    batched = IdempotencyStore(idempotency_table, client=client, clock=clock, record_ttl_s=TTL_S)
    healthy = IdempotencyStore(idempotency_table, client=ddb, clock=clock, record_ttl_s=TTL_S)
    return Stores(healthy, batched, clock, ddb, _operations(client))


def ask(scope: str, key: str, **kwargs: Any) -> AcquireRequest:
    return AcquireRequest(scope, key, lease_ms=LEASE_MS, owner="batch", **kwargs)


def acquired(answer: Acquisition | Exception) -> Acquisition:
    assert isinstance(answer, Acquisition), answer
    return answer


def written(answer: WriteResult | Exception) -> WriteResult:
    assert isinstance(answer, WriteResult), answer
    return answer


# -- every record state: the batched answer is the one-by-one answer -------------------------

Step = Callable[[Stores, str, dict[str, Any]], None]


def _held(**kwargs: Any) -> Step:
    def step(s: Stores, scope: str, ctx: dict[str, Any]) -> None:
        ctx["lock"] = s.hold(scope, "k", **kwargs)

    return step


def _completed(s: Stores, scope: str, ctx: dict[str, Any]) -> None:
    assert s.healthy.complete(ctx["lock"], {"v": 1}).ok


def _failed(retryable: bool) -> Step:
    def step(s: Stores, scope: str, ctx: dict[str, Any]) -> None:
        result = s.healthy.fail(ctx["lock"], ErrorInfo("Boom", "it broke", retryable))
        assert result.ok
        ctx["nonce"] = result.replay_nonce

    return step


PAST_LEASE = LEASE_MS / 1000 + 1
PAST_TTL = TTL_S + 120.0

# name: (steps, where a number advances the clock that many seconds; the request's arguments,
# where "nonce" means the failure's own replay nonce; whether this clock is too far ahead)
STATES: dict[str, tuple[list[Step | float], dict[str, Any], bool]] = {
    "absent": ([], {}, False),
    "completed": ([_held(), _completed], {}, False),
    "in-progress": ([_held()], {}, False),
    "expired-lease": ([_held(), PAST_LEASE], {}, False),
    "expired-lease-blocked": ([_held(), PAST_LEASE], {"block_takeover": True}, False),
    "expired-lease-skewed": ([_held(), PAST_LEASE], {}, True),
    "failed-retryable": ([_held(), _failed(True)], {}, False),
    "failed-permanently": ([_held(), _failed(False)], {}, False),
    "failed-permanently-replayed": ([_held(), _failed(False)], {"replay_nonce": "nonce"}, False),
    "fingerprint-mismatch": ([_held(fingerprint="a")], {"fingerprint": "b"}, False),
    "same-fingerprint-completed": (
        [_held(fingerprint="a"), _completed],
        {"fingerprint": "a"},
        False,
    ),
    "ttl-expired-completed": ([_held(), _completed, PAST_TTL], {}, False),
    "ttl-expired-in-progress": ([_held(), PAST_TTL], {}, False),
}


def _record_view(record: StoredRecord | None) -> Any:
    """A record with what differs between two scopes by chance (ids, tokens, nonces) left out."""
    if record is None:
        return None
    return replace(
        record,
        record_id="",
        lock_token=None,
        replay_nonce="present" if record.replay_nonce else None,
    )


def _answer_view(answer: Acquisition | Exception) -> Any:
    if isinstance(answer, Exception):
        return type(answer).__name__
    lock = answer.lock
    return (
        answer.status,
        None if lock is None else (lock.fence, lock.attempt, lock.lease_expires_at_ms),
        answer.takeover,
        answer.retry,
        answer.resumed,
        _record_view(answer.record),
    )


def _item_view(item: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in item.items() if k not in ("id", "lock_token", "pending_shard")}
    if schema.REPLAY_NONCE in shown:
        shown[schema.REPLAY_NONCE] = "present"
    return shown


@pytest.mark.parametrize("likely_taken", [False, True], ids=["new-hint", "taken-hint"])
@pytest.mark.parametrize("state", STATES)
def test_every_state_is_answered_as_the_single_acquire_answers_it(
    stores: Stores, scope: str, state: str, likely_taken: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps, kwargs, skewed = STATES[state]
    one, batch = f"{scope}-one", f"{scope}-batch"
    contexts: dict[str, dict[str, Any]] = {one: {}, batch: {}}
    for step in steps:  # both scopes in step, so both see the same clock readings
        if isinstance(step, float):
            stores.clock.advance(step)
            continue
        for s, ctx in contexts.items():
            step(stores, s, ctx)
    monkeypatch.setattr(clock_skew, "too_far_ahead", lambda margin_ms: skewed)

    def request(s: str) -> AcquireRequest:
        args = dict(kwargs)
        if args.get("replay_nonce") == "nonce":
            args["replay_nonce"] = contexts[s]["nonce"]
        return ask(s, "k", likely_taken=likely_taken, **args)

    expected = one_by_one.acquire_each(stores.healthy, [request(one)])[0]
    got = stores.batched.acquire_many([request(batch)])[0]

    assert _answer_view(got) == _answer_view(expected)
    assert _item_view(stores.item(batch, "k")) == _item_view(stores.item(one, "k"))
    if isinstance(got, Acquisition) and got.lock is not None:
        assert stores.item(batch, "k")[schema.LOCK_TOKEN]["S"] == got.lock.token


def test_a_mixed_batch_is_answered_in_one_request(stores: Stores, scope: str) -> None:
    completed, running, retryable, permanent, other, expired = (
        stores.hold(scope, k, fingerprint="a")
        for k in ("completed", "running", "retryable", "permanent", "other", "expired")
    )
    assert stores.healthy.complete(completed, "done").ok
    assert stores.healthy.fail(retryable, ErrorInfo("Boom", "again", True)).ok
    assert stores.healthy.fail(permanent, ErrorInfo("Boom", "never", False)).ok
    stores.clock.advance(1)
    stores.healthy.extend(running, 10 * LEASE_MS)
    stores.healthy.extend(other, 10 * LEASE_MS)
    stores.clock.advance(PAST_LEASE)  # only `expired` has passed its lease
    fp = {"fingerprint": "a"}
    answers = [
        acquired(a)
        for a in stores.batched.acquire_many(
            [
                ask(scope, "new", **fp),
                ask(scope, "completed", likely_taken=True, **fp),
                ask(scope, "running", likely_taken=True, **fp),
                ask(scope, "retryable", likely_taken=True, **fp),
                ask(scope, "permanent", likely_taken=True, **fp),
                ask(scope, "other", likely_taken=True, fingerprint="b"),
                ask(scope, "expired", likely_taken=True, **fp),
            ]
        )
    ]
    assert [a.status for a in answers] == [
        AcquireStatus.ACQUIRED,
        AcquireStatus.ALREADY_COMPLETED,
        AcquireStatus.IN_PROGRESS,
        AcquireStatus.ACQUIRED,
        AcquireStatus.FAILED_PERMANENTLY,
        AcquireStatus.FINGERPRINT_MISMATCH,
        AcquireStatus.ACQUIRED,
    ]
    new, retried, taken_over = answers[0], answers[3], answers[6]
    assert new.lock is not None
    assert new.lock.attempt == 1
    assert new.lock.fence == int(stores.clock.now * 1000) + 1
    assert retried.retry
    assert retried.lock is not None
    assert retried.lock.attempt == 2
    assert taken_over.takeover
    assert taken_over.lock is not None
    assert taken_over.lock.fence == expired.fence + 1
    assert stores.sent == Counter({BATCH: 1})


# -- request counts --------------------------------------------------------------------------


def test_ten_new_keys_acquire_in_one_request_and_complete_in_one(
    stores: Stores, scope: str
) -> None:
    answers = stores.batched.acquire_many([ask(scope, f"k{i}") for i in range(10)])
    locks = [acquired(a).lock for a in answers]
    assert stores.sent == Counter({BATCH: 1})
    results = stores.batched.finish_many(
        [Finish(lock, {"i": i}) for i, lock in enumerate(locks) if lock]
    )
    assert [written(r).status for r in results] == [WriteStatus.OK] * 10
    assert stores.sent == Counter({BATCH: 2})
    for i in range(10):
        record = stores.healthy.get(scope, f"k{i}")
        assert record is not None
        assert record.status is Status.COMPLETED
        assert record.result == {"i": i}


def test_ten_hinted_duplicates_cost_one_request(stores: Stores, scope: str) -> None:
    for i in range(10):
        assert stores.healthy.complete(stores.hold(scope, f"k{i}"), i).ok
    answers = stores.batched.acquire_many(
        [ask(scope, f"k{i}", likely_taken=True) for i in range(10)]
    )
    assert [acquired(a).status for a in answers] == [AcquireStatus.ALREADY_COMPLETED] * 10
    assert [acquired(a).record.result for a in answers] == list(range(10))  # type: ignore[union-attr]
    assert stores.sent == Counter({BATCH: 1})


@pytest.mark.parametrize("existing", [False, True], ids=["new-keys-hinted", "duplicates-unhinted"])
def test_ten_wrong_hints_cost_two_requests(stores: Stores, scope: str, existing: bool) -> None:
    if existing:
        for i in range(10):
            assert stores.healthy.complete(stores.hold(scope, f"k{i}"), i).ok
    answers = stores.batched.acquire_many(
        [ask(scope, f"k{i}", likely_taken=not existing) for i in range(10)]
    )
    expected = AcquireStatus.ALREADY_COMPLETED if existing else AcquireStatus.ACQUIRED
    assert [acquired(a).status for a in answers] == [expected] * 10
    assert stores.sent == Counter({BATCH: 2})


def test_more_than_25_keys_go_in_calls_of_25(stores: Stores, scope: str) -> None:
    answers = stores.batched.acquire_many([ask(scope, f"k{i}") for i in range(60)])
    assert [acquired(a).status for a in answers] == [AcquireStatus.ACQUIRED] * 60
    assert stores.sent == Counter({BATCH: 3})


# -- faults ----------------------------------------------------------------------------------


@dataclass
class StatementFault:
    """Answers one statement of the next batch with `code`. Unapplied (a throttle), the
    statement is taken out of the request DynamoDB receives; applied (an internal error after
    the write), the whole batch goes through and only that statement's answer is replaced.
    An empty code lets the statement succeed but takes the old item out of its answer."""

    position: int
    code: str
    applied: bool = False
    hits: int = 0

    def install(self, client: DynamoDBClient) -> None:
        session = URLLib3Session()

        def before_send(request: Any, event_name: str = "", **_: Any) -> Any:
            if not event_name.endswith(BATCH) or self.hits:
                return None
            self.hits += 1
            body = json.loads(request.body)
            if not self.applied:
                del body["Statements"][self.position]
                request.body = json.dumps(body).encode()
                request.headers["Content-Length"] = str(len(request.body))
            reply = json.loads(session.send(request).content)
            error = {"Error": {"Code": self.code, "Message": "injected by the test"}}
            if self.code == "":  # a success that does not bring the old item back
                del reply["Responses"][self.position]["Item"]
            elif self.applied:
                reply["Responses"][self.position] = error
            else:
                reply["Responses"].insert(self.position, error)
            return error_response(str(request.url), 200, json.dumps(reply).encode())

        client.meta.events.register("before-send.dynamodb", before_send)


@dataclass
class Sequenced:
    """Each BatchExecuteStatement attempt in turn: "lost" (applied, reply lost), "throttle"
    (not applied), "denied" (refused by IAM, not applied), or "pass"."""

    kinds: list[str]
    hits: list[str] = field(default_factory=list)

    def install(self, client: DynamoDBClient) -> None:
        session = URLLib3Session()

        def before_send(request: Any, event_name: str = "", **_: Any) -> Any:
            if not event_name.endswith(BATCH) or len(self.hits) >= len(self.kinds):
                return None
            kind = self.kinds[len(self.hits)]
            self.hits.append(kind)
            if kind == "throttle":
                return throttle_response(str(request.url))
            if kind == "denied":  # a role without the PartiQL actions: never retried
                body = b'{"__type": "AccessDeniedException", "message": "not authorized"}'
                return error_response(str(request.url), 400, body)
            if kind == "lost":
                session.send(request)
                return error_response(str(request.url), 500, b'{"__type": "InternalServerError"}')
            return None

        client.meta.events.register("before-send.dynamodb", before_send)


def _held_by_answers(stores: Stores, scope: str, keys: list[str], answers: list[Any]) -> None:
    """Each key is ACQUIRED once, its stored token is the answer's, at the stored fence and
    attempt; and nobody else can take it now."""
    for key, answer in zip(keys, answers, strict=True):
        lock = acquired(answer).lock
        assert lock is not None, (key, answer)
        item = stores.item(scope, key)
        assert item[schema.LOCK_TOKEN]["S"] == lock.token
        assert int(item[schema.FENCE]["N"]) == lock.fence
        assert int(item[schema.ATTEMPTS]["N"]) == lock.attempt
    again = stores.healthy.acquire_many([ask(scope, k, likely_taken=True) for k in keys])
    assert [acquired(a).status for a in again] == [AcquireStatus.IN_PROGRESS] * len(keys)


def _mixed_keys(stores: Stores, scope: str) -> tuple[list[AcquireRequest], list[Lock]]:
    """Three new keys, one retryable failure hinted, one expired lease hinted, and one new key
    wrongly hinted: INSERTs and UPDATEs in one batch, and a second round."""
    retryable, expired = stores.hold(scope, "retryable"), stores.hold(scope, "expired")
    assert stores.healthy.fail(retryable, ErrorInfo("Boom", "again", True)).ok
    stores.clock.advance(PAST_LEASE)
    asks = [ask(scope, f"new{i}") for i in range(3)] + [
        ask(scope, "retryable", likely_taken=True),
        ask(scope, "expired", likely_taken=True),
        ask(scope, "wrong", likely_taken=True),
    ]
    return asks, [retryable, expired]


@pytest.mark.parametrize("lost", [[], ["pass"]], ids=["first-round", "second-round"])
def test_a_lost_batch_reply_is_recognised_as_our_own_acquisitions(
    stores: Stores, scope: str, lost: list[str]
) -> None:
    asks, (retryable, expired) = _mixed_keys(stores, scope)
    fault = Sequenced([*lost, "lost"])
    fault.install(stores.batched.client)
    answers = stores.batched.acquire_many(asks)
    assert fault.hits == [*lost, "lost"]
    keys = [a.key for a in asks]
    _held_by_answers(stores, scope, keys, answers)
    now_fence = int(stores.clock.now * 1000) + 1
    fences = [acquired(a).lock.fence for a in answers]  # type: ignore[union-attr]
    assert fences == [now_fence] * 3 + [retryable.fence + 1, expired.fence + 1, now_fence]
    assert [acquired(a).lock.attempt for a in answers] == [1, 1, 1, 2, 2, 1]  # type: ignore[union-attr]
    # The first round's retried INSERTs meet their own items (DuplicateItem) and the second
    # round's UPDATEs are refused with them; a second-round INSERT's retry has no third round,
    # so that key's own UpdateItem finds it.
    assert stores.sent == Counter({BATCH: 3, "UpdateItem": len(lost)})


def test_a_batch_applied_then_throttled_past_the_retries_falls_back_and_finds_its_writes(
    stores: Stores, scope: str
) -> None:
    asks, (retryable, expired) = _mixed_keys(stores, scope)
    fault = Sequenced(["lost"] + ["throttle"] * (ATTEMPTS - 1))
    fault.install(stores.batched.client)
    answers = stores.batched.acquire_many(asks)
    _held_by_answers(stores, scope, [a.key for a in asks], answers)
    assert [acquired(a).lock.fence for a in answers][3:5] == [  # type: ignore[union-attr]
        retryable.fence + 1,
        expired.fence + 1,
    ]
    assert stores.sent[BATCH] == ATTEMPTS
    assert stores.sent["UpdateItem"] == len(asks)


def test_a_batch_throttled_past_the_retries_acquires_each_key_alone(
    stores: Stores, scope: str
) -> None:
    asks, _ = _mixed_keys(stores, scope)
    fault = Fault("throttle", BATCH)
    fault.install(stores.batched.client)
    answers = stores.batched.acquire_many(asks)
    assert fault.hits == ["throttle"] * ATTEMPTS
    _held_by_answers(stores, scope, [a.key for a in asks], answers)
    assert acquired(answers[3]).retry
    assert acquired(answers[4]).takeover
    assert stores.sent == Counter({BATCH: ATTEMPTS, "UpdateItem": len(asks)})


@pytest.mark.parametrize(
    ("code", "applied"),
    [
        ("ThrottlingError", False),
        ("ProvisionedThroughputExceeded", False),
        ("ValidationError", False),
        ("InternalServerError", True),
        ("TransactionConflict", False),
        ("SomethingNew", True),
    ],
)
@pytest.mark.parametrize("position", [0, 3], ids=["insert", "update"])
def test_a_failed_statement_falls_back_for_its_key_alone(
    stores: Stores, scope: str, code: str, applied: bool, position: int
) -> None:
    asks, _ = _mixed_keys(stores, scope)
    fault = StatementFault(position, code, applied)
    fault.install(stores.batched.client)
    answers = stores.batched.acquire_many(asks)
    assert fault.hits == 1
    _held_by_answers(stores, scope, [a.key for a in asks], answers)
    if not applied and position == 3:  # the fallback itself took the FAILED record
        assert acquired(answers[3]).retry
    assert stores.sent == Counter({BATCH: 2, "UpdateItem": 1})  # one round for `wrong`


def test_an_update_that_brings_no_old_item_back_is_confirmed_by_its_single_call(
    stores: Stores, scope: str
) -> None:
    """Real DynamoDB might not honour RETURNING in a batch: the key's own UpdateItem, with the
    same token, is refused with the item the batch wrote and reports it ACQUIRED."""
    asks, (retryable, _) = _mixed_keys(stores, scope)
    fault = StatementFault(3, "", applied=True)
    fault.install(stores.batched.client)
    answers = stores.batched.acquire_many(asks)
    assert fault.hits == 1
    _held_by_answers(stores, scope, [a.key for a in asks], answers)
    lock = acquired(answers[3]).lock
    assert lock is not None
    assert (lock.fence, lock.attempt) == (retryable.fence + 1, 2)  # written once, by the batch
    assert stores.sent == Counter({BATCH: 2, "UpdateItem": 1})


def test_a_key_whose_fallback_raises_has_that_error_as_its_answer(
    stores: Stores, scope: str
) -> None:
    fault = StatementFault(1, "ThrottlingError")
    fault.install(stores.batched.client)
    Fault("throttle", "UpdateItem").install(stores.batched.client)  # the fallback, too
    answers = stores.batched.acquire_many([ask(scope, f"k{i}") for i in range(3)])
    assert isinstance(answers[1], Exception)
    assert acquired(answers[0]).acquired
    assert acquired(answers[2]).acquired


# -- finish ----------------------------------------------------------------------------------


def _finishes(stores: Stores, scope: str) -> list[Finish]:
    answers = stores.batched.acquire_many([ask(scope, f"k{i}") for i in range(4)])
    locks = [acquired(a).lock for a in answers]
    assert all(locks)
    return [
        Finish(locks[0], {"done": 0}),  # type: ignore[arg-type]
        Finish(locks[1], None, ErrorInfo("Declined", "never", retryable=False)),  # type: ignore[arg-type]
        Finish(locks[2], None, ErrorInfo("Released", "by its holder", retryable=True)),  # type: ignore[arg-type]
        Finish(locks[3], "x" * 100_000),  # type: ignore[arg-type]  # over the 64 KB cap
    ]


def _finished_right(stores: Stores, scope: str, results: list[WriteResult | Exception]) -> None:
    assert [written(r).status for r in results] == [WriteStatus.OK] * 4
    items = [stores.item(scope, f"k{i}") for i in range(4)]
    assert [i[schema.STATUS]["S"] for i in items] == ["COMPLETED", "FAILED", "FAILED", "COMPLETED"]
    assert items[0][schema.RESULT]["S"] == '{"done":0}'
    assert written(results[1]).replay_nonce == items[1][schema.REPLAY_NONCE]["S"]
    assert items[1][schema.ERROR]["M"]["retryable"] == {"BOOL": False}
    assert schema.REPLAY_NONCE not in items[2]
    assert items[2][schema.ERROR]["M"]["retryable"] == {"BOOL": True}
    assert schema.RESULT not in items[3]
    assert int(items[3][schema.RESULT_SIZE]["N"]) == 100_002
    assert all(schema.PENDING_SHARD not in i for i in (items[0], items[3]))
    again = stores.healthy.acquire_many([ask(scope, f"k{i}", likely_taken=True) for i in range(4)])
    assert [acquired(a).status for a in again] == [
        AcquireStatus.ALREADY_COMPLETED,
        AcquireStatus.FAILED_PERMANENTLY,
        AcquireStatus.ACQUIRED,  # a release runs again
        AcquireStatus.ALREADY_COMPLETED,
    ]


def test_a_batch_of_outcomes_is_written_in_one_request(stores: Stores, scope: str) -> None:
    finishes = _finishes(stores, scope)
    stores.sent.clear()
    _finished_right(stores, scope, stores.batched.finish_many(finishes))
    assert stores.sent == Counter({BATCH: 1})


def test_a_lost_finish_reply_is_recognised_as_our_own_writes(stores: Stores, scope: str) -> None:
    finishes = _finishes(stores, scope)
    fault = Sequenced(["lost"])
    fault.install(stores.batched.client)
    stores.sent.clear()
    _finished_right(stores, scope, stores.batched.finish_many(finishes))
    assert fault.hits == ["lost"]
    assert stores.sent == Counter({BATCH: 2})


@pytest.mark.parametrize(
    "kinds", [["throttle"] * ATTEMPTS, ["lost"] + ["throttle"] * (ATTEMPTS - 1)]
)
def test_a_finish_batch_failing_whole_writes_each_outcome_alone(
    stores: Stores, scope: str, kinds: list[str]
) -> None:
    finishes = _finishes(stores, scope)
    Sequenced(kinds).install(stores.batched.client)
    stores.sent.clear()
    _finished_right(stores, scope, stores.batched.finish_many(finishes))
    assert stores.sent == Counter({BATCH: ATTEMPTS, "UpdateItem": 4})


@pytest.mark.parametrize(
    ("code", "applied"),
    [("ValidationError", False), ("ThrottlingError", False), ("InternalServerError", True)],
)
@pytest.mark.parametrize("position", [1, 3])
def test_a_failed_finish_statement_falls_back_for_its_key_alone(
    stores: Stores, scope: str, code: str, applied: bool, position: int
) -> None:
    finishes = _finishes(stores, scope)
    StatementFault(position, code, applied).install(stores.batched.client)
    stores.sent.clear()
    _finished_right(stores, scope, stores.batched.finish_many(finishes))
    assert stores.sent == Counter({BATCH: 1, "UpdateItem": 1})


def test_a_zombies_finish_is_lease_lost_and_leaves_the_new_holder_alone(
    stores: Stores, scope: str
) -> None:
    zombie, mine = (
        acquired(a).lock for a in stores.batched.acquire_many([ask(scope, "k"), ask(scope, "mine")])
    )
    assert zombie is not None
    assert mine is not None
    stores.clock.advance(PAST_LEASE)
    successor = stores.hold(scope, "k")  # took the expired lease over
    before = stores.item(scope, "k")
    results = stores.batched.finish_many(
        [Finish(zombie, "late"), Finish(mine, None, ErrorInfo("Boom", "x", False))]
    )
    lost = written(results[0])
    assert lost.status is WriteStatus.LEASE_LOST
    assert lost.current is not None
    assert lost.current.lock_token == successor.token
    assert stores.item(scope, "k") == before
    assert written(results[1]).ok


def test_an_inherited_lock_is_refused_for_its_key_alone(stores: Stores, scope: str) -> None:
    answers = stores.batched.acquire_many([ask(scope, "a"), ask(scope, "b")])
    a, b = (acquired(x).lock for x in answers)
    assert a is not None
    assert b is not None
    inherited = replace(a, process="the-parent")
    results = stores.batched.finish_many([Finish(inherited, 1), Finish(b, 2)])
    assert isinstance(results[0], LockInherited)
    assert written(results[1]).ok
    assert stores.item(scope, "a")[schema.STATUS]["S"] == "IN_PROGRESS"


def test_a_role_without_the_partiql_actions_still_acquires_and_finishes_each_key(
    stores: Stores, scope: str
) -> None:
    asks, _ = _mixed_keys(stores, scope)
    Sequenced(["denied"] * 3).install(stores.batched.client)
    answers = stores.batched.acquire_many(asks)
    _held_by_answers(stores, scope, [a.key for a in asks], answers)
    assert stores.sent == Counter({BATCH: 1, "UpdateItem": len(asks)})
    locks = [acquired(a).lock for a in answers]
    results = stores.batched.finish_many([Finish(lock, "done") for lock in locks if lock])
    assert [written(r).status for r in results] == [WriteStatus.OK] * len(asks)
    assert stores.sent == Counter({BATCH: 2, "UpdateItem": 2 * len(asks)})
