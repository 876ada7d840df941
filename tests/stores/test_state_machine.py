"""The store's state machine under interleavings and faults, on BOTH stores (hypothesis).

For two keys, hypothesis interleaves deliveries through the record processor (whose business
function applies the key's effect, then succeeds, raises, fails permanently or raises a
BaseException), hand-driven holders that acquire, apply the effect, complete, fail, extend or
die between any two steps (zombies) and may name a durable execution that resumes its own lock
(`resume_id`, from either worker: a replay), clock jumps past a lease and past the expiry, each
backend's sweep of expired records, lost replies and a database unreachable past the retries.
Batches (batch_model.py) acquire several keys in one `acquire_many` and finish holders, zombies
and finished locks in one `finish_many`, with the reply of the whole call lost at random (on
DynamoDB the BatchExecuteStatement's, on PostgreSQL the batch statement's); each key's answer,
and every single `acquire`, is held to the same prediction from the record before the call.

The effect is each store's exactly-once way: on DynamoDB a fenced `put_once`; on PostgreSQL an
insert in `ctx.transaction`, which commits only with the holder's completion. Invariants:

- at most one holder of a key is ever told its effect took place, and a processed message's
  effect exists;
- on PostgreSQL, no effect row exists whose holder's completion did not commit;
- a holder superseded by a newer fence can write nothing (fenced completion, failure, lease);
- a key whose record is COMPLETED and live never runs again;
- the fence strictly increases per key; an expired lease never blocks the next delivery;
- no key is granted while another grant's lease lives, whoever asked (every path);
- a COMPLETED record stays as completed while it lives, and a refused write changes nothing;
- every message is succeeded, reported failed, or in the DLQ.

(tests/store/test_model.py explores the DynamoDB store further: SNS shapes and replays.)
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Protocol

import pytest
from botocore.retries.standard import ExponentialBackoff
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from exactly_once import completion as completion_module
from exactly_once.effects import LeaseLost, put_once
from exactly_once.errors import ConfigurationError, LockInherited, PermanentError
from exactly_once.outcomes import Outcome
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.context import RecordContext
from exactly_once.sqs.messages import SqsMessage
from exactly_once.sqs.processor import RecordProcessor
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import (
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Finish,
    Lock,
    StoredRecord,
)
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock
from tests.stores.batch_model import (
    BatchLocks,
    BatchRules,
    check_acquisition,
    ddb_raw_many,
    holders_for,
    install_lost_batch_replies,
    predict_acquire,
)
from tests.stores.durable_checks import (
    assert_left_for_the_replay,
    assert_resumed,
    forked_copy,
    still_suspended,
)

KEYS = ("k0", "k1")
WORKERS = (0, 1)
LEASE_MS = 10_000
TTL_S = 120
BEHAVIOURS = ("ok", "raise", "permanent", "cancel")
EXECUTIONS = (None, "e1", "e2")  # resume_id: none, or one of two durable executions
CLONE_WRITES = ("complete", "fail", "extend", "effect", "transaction", "discard")
UNKNOWN = "?"  # the model cannot tell who acquired last (an acquire whose reply never came)


@dataclass
class Faults:
    """What the store's next calls meet; `fired` says one happened since it was reset."""

    lose: int = 0
    unreachable: int = 0
    lose_batch: int = 0  # the next batch call's reply (batch_model)
    fired: bool = False


class Backend(Protocol):
    """One store under test, with its own faults, effect, raw reads and sweep."""

    name: str

    def store(self, clock: FakeClock, faults: Faults) -> Store: ...

    def raw(self, scope: str, key: str) -> StoredRecord | None:
        """The record as stored, expired or not."""
        ...

    def raw_many(self, scope: str, keys: Sequence[str]) -> dict[str, StoredRecord | None]:
        """`raw` of several keys, in one request."""
        ...

    def apply_effect(self, ctx: RecordContext) -> bool:
        """Apply the key's effect; True when this holder's effect is the one (pending commit
        on PostgreSQL)."""
        ...

    def effect_fences(self, scope: str, key: str) -> set[int]:
        """The fences of the effects that exist (committed) for the key."""
        ...

    def sweep(self, scope: str, key: str, now_s: float) -> None: ...


@dataclass
class FakeDeadLetterQueue:
    sent: list[dict[str, Any]] = field(default_factory=list)

    def send_message(self, **params: Any) -> dict[str, str]:
        self.sent.append(params)
        return {"MessageId": str(uuid.uuid4())}


def _record(key: str) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "body": json.dumps({"id": key}),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
    }


class StateMachine(BatchRules, RuleBasedStateMachine):
    backend: Backend

    def __init__(self) -> None:
        super().__init__()
        self.scope = f"sm-{uuid.uuid4().hex[:10]}"
        self.clock = FakeClock()
        self.faults = Faults()
        self.store = self.backend.store(self.clock, self.faults)
        self.live_holders = holders_for(self.clock, self.store)
        self.batch = BatchLocks()
        self.completed: dict[str, StoredRecord] = {}
        self.lease_ms = LEASE_MS
        self.dlq = FakeDeadLetterQueue()
        self.block = False
        self.processor: RecordProcessor | None = None
        self.holders: dict[int, tuple[str, Lock] | None] = dict.fromkeys(WORKERS)
        self.executions: dict[int, str | None] = dict.fromkeys(WORKERS)  # each holder's resume_id
        # Per key: a durable holder suspended inside its block (its execution, its lock).
        self.suspended: dict[str, tuple[str, Lock]] = {}
        self.pending_effect: dict[int, bool] = {}  # PostgreSQL: told, awaiting its commit
        self.max_fence: dict[str, int] = {}
        self.told: dict[str, set[int]] = {key: set() for key in KEYS}  # effects that took place
        self.unknown: dict[str, set[int]] = {key: set() for key in KEYS}  # commit outcome unknown
        # Who took each key's lock last: an execution id, None (no resume_id) or UNKNOWN.
        self.latest: dict[str, str | None] = dict.fromkeys(KEYS, UNKNOWN)
        self.behaviour = "ok"
        self.ran = False
        self.delivery_told: int | None = None

    @initialize(block=st.booleans())
    def configure(self, block: bool) -> None:
        self.block = block
        config = ConsumerConfig(
            table_name="t" if self.backend.name == "dynamodb" else None,
            dsn="d" if self.backend.name == "postgres" else None,
            scope=self.scope,
            dead_letter_queue_url="https://sqs.local/123456789012/dlq",
            fingerprint=False,
            block_takeover=block,
            record_ttl_s=TTL_S,
            failed_ttl_s=TTL_S,
        )
        self.processor = RecordProcessor(self._business, "id", config, self.store, self.dlq)  # type: ignore[arg-type]

    @property
    def transactional(self) -> bool:
        return self.backend.name == "postgres"

    def _business(self, body: Any, ctx: RecordContext) -> str:
        self.ran = True
        self._saw_fence(ctx.key, ctx.fence)
        if self.backend.apply_effect(ctx):
            self.delivery_told = ctx.fence
            if not self.transactional:
                self.told[ctx.key].add(ctx.fence)
        if self.behaviour == "raise":
            raise TimeoutError("downstream timed out")
        if self.behaviour == "permanent":
            raise PermanentError("declined")
        if self.behaviour == "cancel":
            raise SystemExit(1)
        return "done"

    def _saw_fence(self, key: str, fence: int) -> None:
        assert fence > self.max_fence.get(key, 0), (key, fence, self.max_fence)
        self.max_fence[key] = fence

    def _live(self, record: StoredRecord | None) -> bool:
        return record is not None and not record.is_expired(self.clock())

    # -- what the batch rules (batch_model.BatchRules) ask of this model --------------------

    def _raw_record(self, key: str) -> StoredRecord | None:
        return self.backend.raw(self.scope, key)

    def _raw_records(self, keys: Sequence[str]) -> dict[str, StoredRecord | None]:
        return self.backend.raw_many(self.scope, keys)

    def _batch_granted(self, key: str, lock: Lock) -> None:
        self.latest[key] = None  # a batch presents no resume_id

    def _batch_unknown(self, key: str) -> None:
        self.latest[key] = UNKNOWN

    def _holder_finished(self, worker: int, finish: Finish, answer: Any) -> None:
        """As `_write` ends: a completion that was written commits the holder's effect."""
        key, lock = self._held(worker)
        pending = self.pending_effect.get(worker, False)
        if isinstance(answer, Exception):
            if pending and finish.error is None:
                self.unknown[key].add(lock.fence)
        elif answer.ok and finish.error is None and pending:
            self.told[key].add(lock.fence)
            assert lock.fence in self.backend.effect_fences(self.scope, key), "effect lost"
        self._abandon(worker)

    # -- deliveries ------------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), behaviour=st.sampled_from(BEHAVIOURS))
    def deliver(self, key: str, behaviour: str) -> None:
        assert self.processor is not None
        before = self.backend.raw(self.scope, key)
        self.behaviour, self.ran, self.faults.fired, self.delivery_told = (
            behaviour,
            False,
            False,
            None,
        )
        result = self.processor.process(SqsMessage.from_record(_record(key)), None)
        if self.ran:
            self.latest[key] = None
        elif self.faults.fired:
            self.latest[key] = UNKNOWN
        if self._live(before) and before is not None and before.status is Status.COMPLETED:
            assert not self.ran, f"{key} ran again while its COMPLETED record lives"
        stuck = (
            self._live(before)
            and before is not None
            and before.status is Status.IN_PROGRESS
            and before.lease_expired(int(self.clock() * 1000))
        )
        if stuck and not self.faults.fired:
            assert result.outcome is not Outcome.IN_PROGRESS, f"{key} stuck past its lease"
        if result.outcome is Outcome.PERMANENT:
            assert result.dead_lettered
            assert not result.report_failure
        elif not result.report_failure:
            assert result.outcome in {Outcome.PROCESSED, Outcome.DUPLICATE}, result
        if self.transactional and self.delivery_told is not None:
            if result.outcome is Outcome.PROCESSED:
                self.told[key].add(self.delivery_told)
            elif self.faults.fired:
                self.unknown[key].add(self.delivery_told)
        if result.outcome is Outcome.PROCESSED:
            assert self.backend.effect_fences(self.scope, key), f"{key} processed, no effect"

    # -- hand-driven holders ---------------------------------------------------------------

    @rule(
        worker=st.sampled_from(WORKERS),
        key=st.sampled_from(KEYS),
        execution=st.sampled_from(EXECUTIONS),
    )
    def hold(self, worker: int, key: str, execution: str | None = None) -> None:
        """`execution`: a durable execution's id (resume_id). Both workers may present the
        same one (a replay in another process while the first invocation still runs): the
        resume makes the earlier holder a zombie, which the fence must keep out."""
        self._hold(worker, key, execution)

    def _hold(self, worker: int, key: str, execution: str | None) -> Acquisition | None:
        """`hold`, returning the acquisition (None when the store could not be reached)."""
        if self.holders[worker] is not None:
            self._abandon(worker)
        before = self.backend.raw(self.scope, key)
        expected = predict_acquire(
            before,
            int(self.clock() * 1000),
            fingerprint=None,
            block_takeover=self.block,
            replay_nonce=None,
            resume_id=execution,
        )
        self.faults.fired = False
        try:
            got = self.store.acquire(
                self.scope,
                key,
                lease_ms=LEASE_MS,
                owner=f"w{worker}",
                block_takeover=self.block,
                resume_id=execution,
            )
        except Exception:
            assert self.faults.fired
            self.latest[key] = UNKNOWN
            return None
        # the very prediction each key of a batch is held to (batch_model)
        after = self.backend.raw(self.scope, key)
        check_acquisition(got, expected, before, after, faulted=self.faults.fired)
        if got.status is AcquireStatus.ACQUIRED:
            assert got.lock is not None
            if self._live(before) and before is not None:
                assert before.status is not Status.COMPLETED, "a completed key was acquired"
                live_lock = before.status is Status.IN_PROGRESS and not before.lease_expired(
                    int(self.clock() * 1000)
                )
                if live_lock and self.latest[key] != UNKNOWN:
                    # Only a resume takes a live lock, and only its own execution's.
                    assert got.resumed, "a live lock was taken over"
                    assert execution is not None, "a live lock was taken without a resume_id"
                    assert self.latest[key] == execution, "a live lock of another was resumed"
            self.latest[key] = execution
            self._saw_fence(key, got.lock.fence)
            self.holders[worker] = (key, got.lock)
            self.executions[worker] = execution
            self.pending_effect[worker] = False
        return got

    def _held(self, worker: int) -> tuple[str, Lock]:
        held = self.holders[worker]
        assert held is not None
        return held

    def _abandon(self, worker: int) -> None:
        """The holder stops here (dies, or is superseded): its open transaction goes away."""
        _key, lock = self._held(worker)
        self.store.discard(lock)
        self.holders[worker] = None
        self.pending_effect[worker] = False

    @precondition(lambda self: any(self.holders.values()))
    @rule(data=st.data())
    def holder_effect(self, data: st.DataObject) -> None:
        self._effect(data.draw(st.sampled_from([w for w, h in self.holders.items() if h])))

    def _effect(self, worker: int) -> None:
        key, lock = self._held(worker)
        ctx = RecordContext("manual", key, lock.fence, lock.attempt, {}, None, self.store, lock)
        self.faults.fired = False
        try:
            applied = self.backend.apply_effect(ctx)
        except LeaseLost:
            self._abandon(worker)
            return
        except Exception as exc:
            # PostgreSQL: the effect's row is held by a zombie's open transaction; after the
            # lock timeout this holder gives up, and its work is retried later.
            blocked = type(exc).__name__ == "LockNotAvailable"
            assert self.faults.fired or blocked, repr(exc)  # noqa: PT017 (a model, not a test)
            self._abandon(worker)  # a broken transaction is rolled back
            return
        if applied and self.transactional:
            self.pending_effect[worker] = True
        elif applied:
            self.told[key].add(lock.fence)

    @rule(
        key=st.sampled_from(KEYS),
        effect=st.booleans(),
        then=st.sampled_from(("later", "zombie_completes", "successor_completes_first")),
    )
    def zombie(self, key: str, effect: bool, then: str) -> None:
        """Worker 0 holds the key (and applies its effect), is frozen past its lease, and
        worker 1 takes the key over; then the zombie or its successor completes first, or
        both go on later (other rules)."""
        self.hold(0, key)
        if effect and self.holders[0] is not None:
            self._effect(0)
        self.clock.advance(LEASE_MS / 1000 + 1)
        self.hold(1, key)
        if then == "successor_completes_first" and self.holders[1] is not None:
            self._effect(1)
            if self.holders[1] is not None:
                self._write(1, "complete")
        if then != "later" and self.holders[0] is not None:
            self._write(0, "complete")

    @precondition(lambda self: any(self.holders.values()))
    @rule(data=st.data(), action=st.sampled_from(("complete", "fail", "permanent", "extend")))
    def holder_write(self, data: st.DataObject, action: str) -> None:
        self._write(data.draw(st.sampled_from([w for w, h in self.holders.items() if h])), action)

    def _write(self, worker: int, action: str) -> None:
        key, lock = self._held(worker)
        pending = self.pending_effect.get(worker, False)
        superseded = self.max_fence[key] > lock.fence  # a newer holder took the key
        self.faults.fired = False
        try:
            if action == "complete":
                written = self.store.complete(lock, {"by": worker})
            elif action == "extend":
                written = self.store.extend(lock, LEASE_MS)
            else:
                written = self.store.fail(lock, ErrorInfo("Manual", "x", action == "fail"))
        except Exception:
            assert self.faults.fired
            if pending and action == "complete":
                self.unknown[key].add(lock.fence)
            self._abandon(worker)
            return
        if superseded:
            assert not written.ok, f"a superseded holder's {action} was written"
        if action == "extend" and written.ok:
            assert written.lock is not None
            self.holders[worker] = (key, written.lock)
            return
        if action == "complete" and written.ok and pending:
            self.told[key].add(lock.fence)
            # Committed with the completion: nothing (a clone's discard) rolled it back.
            assert lock.fence in self.backend.effect_fences(self.scope, key), "effect lost"
        self._abandon(worker)

    @precondition(lambda self: any(self.holders.values()))
    @rule(worker=st.sampled_from(WORKERS))
    def holder_dies(self, worker: int) -> None:
        if self.holders[worker] is not None:
            self._abandon(worker)

    # -- clones and durable suspensions ----------------------------------------------------

    @precondition(lambda self: any(self.holders.values()))
    @rule(data=st.data(), write=st.sampled_from(CLONE_WRITES))
    def fork(self, data: st.DataObject, write: str) -> None:
        """A holder's process forks. The child has the holder's Lock, taken by the
        parent: not its own, as the child's instance id is new at the fork (modelled by a copy
        whose process is not this one). Every write and effect it makes with it is
        refused with LockInherited and changes nothing; its discard ends nothing of the
        parent's (whose pending effect must still commit with its completion, `_write`).
        The parent holds on, through the other rules."""
        self._fork(data.draw(st.sampled_from([w for w, h in self.holders.items() if h])), write)

    def _fork(self, worker: int, write: str) -> None:
        key, lock = self._held(worker)
        clone = forked_copy(lock)
        before = self.backend.raw(self.scope, key)
        effects_before = self.backend.effect_fences(self.scope, key)
        try:
            self._clone_write(clone, key, write)
            refused = False
        except LockInherited:
            refused = True
        except ConfigurationError:  # DynamoDB lends no transaction to anyone, clone or not
            refused = write == "transaction" and not self.transactional
        assert refused or write == "discard", f"a clone's {write} was not refused"
        assert self.backend.raw(self.scope, key) == before, f"a clone's {write} changed it"
        assert self.backend.effect_fences(self.scope, key) == effects_before

    def _clone_write(self, clone: Lock, key: str, write: str) -> None:
        if write == "complete":
            self.store.complete(clone, {"by": "clone"})
        elif write == "fail":
            self.store.fail(clone, ErrorInfo("Clone", "x", retryable=False))
        elif write == "extend":
            self.store.extend(clone, LEASE_MS)
        elif write == "transaction":
            self.store.transaction(clone)
        elif write == "discard":
            self.store.discard(clone)
        else:
            ctx = RecordContext(
                "clone", key, clone.fence, clone.attempt, {}, None, self.store, clone
            )
            self.backend.apply_effect(ctx)

    @precondition(lambda self: any(h and self.executions[w] for w, h in self.holders.items()))
    @rule(data=st.data())
    def durable_suspend(self, data: st.DataObject) -> None:
        """A durable holder's invocation is suspended inside its block (a wait): it writes no
        outcome, its open transaction rolls back, and its record stays IN_PROGRESS under its
        lock and execution, for the replay to resume."""
        durable = [w for w, h in self.holders.items() if h and self.executions[w]]
        self._suspend(data.draw(st.sampled_from(durable)))

    def _suspend(self, worker: int) -> None:
        key, lock = self._held(worker)
        execution = self.executions[worker]
        assert execution is not None
        self._abandon(worker)
        assert_left_for_the_replay(self.backend.raw(self.scope, key), lock, execution)
        self.suspended[key] = (execution, lock)

    @precondition(lambda self: bool(self.suspended))
    @rule(data=st.data(), worker=st.sampled_from(WORKERS))
    def durable_resume(self, data: st.DataObject, worker: int) -> None:
        """The execution's replay presents the same resume_id: while the record is still the
        suspended lock's, it resumes it, with a higher fence; from then on every write of the
        suspended invocation is refused."""
        self._resume(data.draw(st.sampled_from(sorted(self.suspended))), worker)

    def _resume(self, key: str, worker: int) -> None:
        execution, suspended = self.suspended.pop(key)
        own = still_suspended(self.backend.raw(self.scope, key), self.clock(), suspended)
        got = self._hold(worker, key, execution)
        if got is None or self.faults.fired:
            return  # unknown whether it was taken
        if own:
            assert_resumed(got, suspended)
        if self.max_fence[key] > suspended.fence:
            self._refused_after_resume(key, suspended)

    def _refused_after_resume(self, key: str, suspended: Lock) -> None:
        """The suspended invocation, superseded, can write nothing: no outcome, no lease, no
        effect (on PostgreSQL its effect's transaction never commits: its completion fails)."""
        effects_before = self.backend.effect_fences(self.scope, key)
        for action in ("extend", "fail", "effect", "complete"):
            self.faults.fired = False
            try:
                if action == "extend":
                    written = self.store.extend(suspended, LEASE_MS)
                elif action == "fail":
                    written = self.store.fail(suspended, ErrorInfo("Late", "x", retryable=True))
                elif action == "complete":
                    written = self.store.complete(suspended, {"by": "suspended"})
                else:
                    ctx = RecordContext(
                        "late",
                        key,
                        suspended.fence,
                        suspended.attempt,
                        {},
                        None,
                        self.store,
                        suspended,
                    )
                    applied = self.backend.apply_effect(ctx)
                    assert self.transactional or not applied, "a superseded effect was applied"
                    continue
            except LeaseLost:
                assert action == "effect"
                continue
            except Exception as exc:
                blocked = type(exc).__name__ == "LockNotAvailable"
                assert self.faults.fired or blocked, repr(exc)  # noqa: PT017 (a model)
                self.store.discard(suspended)
                continue
            assert not written.ok, f"the suspended invocation's {action} was written"
        self.store.discard(suspended)
        if self.transactional:  # (DynamoDB's effect before the suspension stays: put_once)
            assert suspended.fence not in self.backend.effect_fences(self.scope, key)
        assert self.backend.effect_fences(self.scope, key) <= effects_before

    # -- time and faults -------------------------------------------------------------------

    @rule(seconds=st.sampled_from((1.0, LEASE_MS / 1000 + 1, TTL_S + LEASE_MS / 1000 + 61)))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(key=st.sampled_from(KEYS))
    def sweep(self, key: str) -> None:
        self.backend.sweep(self.scope, key, self.clock())

    @rule()
    def lose_next_reply(self) -> None:
        self.faults.lose = 1

    @rule()
    def unreachable_next_call(self) -> None:
        self.faults.unreachable = 3  # every attempt of the next call

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def at_most_one_effect_per_key(self) -> None:
        for key in KEYS:
            assert len(self.told[key]) <= 1, (key, self.told)

    @invariant()
    def no_effect_without_its_completion(self) -> None:
        if not self.transactional:
            return  # DynamoDB's effect is fenced on its own, before the completion
        for key in KEYS:
            existing = self.backend.effect_fences(self.scope, key)
            assert existing <= self.told[key] | self.unknown[key], (key, existing, self.told)

    def teardown(self) -> None:
        for worker in WORKERS:
            if self.holders[worker] is not None:
                self._abandon(worker)


class DynamoDBBackend(Backend):
    name = "dynamodb"

    def __init__(self, endpoint: str, ddb: Any, table: str, effects: str) -> None:
        self.endpoint, self.ddb, self.table, self.effects = endpoint, ddb, table, effects

    def store(self, clock: FakeClock, faults: Faults) -> Store:
        from exactly_once.stores.dynamodb.store import IdempotencyStore
        from fault_injection.lost_replies import install_lost_replies
        from fault_injection.throttling import install_throttling
        from tests.conftest import make_ddb_client

        client = make_ddb_client(self.endpoint, max_attempts=2)

        def lose(operation: str) -> bool:
            if faults.lose > 0 and operation in {"UpdateItem", "PutItem", "TransactWriteItems"}:
                faults.lose -= 1
                faults.fired = True
                return True
            return False

        class Draws:
            def random(self) -> float:
                if faults.unreachable > 0:
                    faults.unreachable -= 1
                    faults.fired = True
                    return 0.0
                return 0.99

        install_throttling(client, 0.5, Draws())  # type: ignore[arg-type]
        install_lost_replies(client, lose)
        install_lost_batch_replies(client, faults)
        return IdempotencyStore(
            self.table, client=client, clock=clock, record_ttl_s=TTL_S, failed_ttl_s=TTL_S
        )

    def raw(self, scope: str, key: str) -> StoredRecord | None:
        item = self.ddb.get_item(
            TableName=self.table, Key={"id": {"S": f"{scope}#{key}"}}, ConsistentRead=True
        ).get("Item")
        return StoredRecord.from_item(dict(item)) if item else None

    def raw_many(self, scope: str, keys: Sequence[str]) -> dict[str, StoredRecord | None]:
        return ddb_raw_many(self.ddb, self.table, scope, keys)

    def _item(self, ctx_or_scope: Any, key: str | None = None) -> dict[str, Any]:
        scope = ctx_or_scope if isinstance(ctx_or_scope, str) else ctx_or_scope.scope
        key = key if key is not None else ctx_or_scope.key
        return {"pk": {"S": f"{scope}#{key}"}, "sk": {"S": "effect"}}

    def apply_effect(self, ctx: RecordContext) -> bool:
        item = {**self._item(ctx), "fence": {"N": str(ctx.fence)}}
        return put_once(ctx, self.effects, item, key_names=("pk", "sk"))

    def effect_fences(self, scope: str, key: str) -> set[int]:
        item = self.ddb.get_item(
            TableName=self.effects, Key=self._item(scope, key), ConsistentRead=True
        ).get("Item")
        return {int(item["fence"]["N"])} if item else set()

    def sweep(self, scope: str, key: str, now_s: float) -> None:
        record = self.raw(scope, key)
        if record is not None and record.is_expired(now_s):
            self.ddb.delete_item(TableName=self.table, Key={"id": {"S": f"{scope}#{key}"}})


class PostgresBackend(Backend):
    name = "postgres"

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: Any = None  # the model's own reads: one connection, not one per read

    def _reads(self) -> Any:
        import psycopg
        from psycopg.rows import dict_row

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def store(self, clock: FakeClock, faults: Faults) -> Store:
        from exactly_once.stores.postgres.store import PostgresStore
        from fault_injection.pg_faults import faulty_store_pools

        def decide(kind: str) -> str | None:
            if faults.unreachable > 0 and kind != "business":
                faults.unreachable -= 1
                faults.fired = True
                return "fail"
            if faults.lose > 0 and kind in {"acquire", "write", "complete"}:
                faults.lose -= 1
                faults.fired = True
                return "lose"
            if faults.lose_batch > 0 and kind in {"acquire", "write", "complete"}:
                faults.lose_batch -= 1  # armed only around a batch call: its statement
                faults.fired = True
                return "lose"
            return None

        return PostgresStore(
            self.dsn,
            clock=clock,
            record_ttl_s=TTL_S,
            failed_ttl_s=TTL_S,
            **faulty_store_pools(self.dsn, decide),
        )

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self._reads().execute(sql, params).fetchall()
        return rows

    def raw(self, scope: str, key: str) -> StoredRecord | None:
        from exactly_once.stores.postgres.rows import COLUMNS, record_from_row

        rows = self._query(
            f"SELECT {COLUMNS} FROM exactly_once.records WHERE id = %s",  # noqa: S608
            (f"{scope}#{key}",),
        )
        return record_from_row(rows[0]) if rows else None

    def raw_many(self, scope: str, keys: Sequence[str]) -> dict[str, StoredRecord | None]:
        from exactly_once.stores.postgres.rows import COLUMNS, record_from_row

        ids = {f"{scope}#{key}": key for key in keys}
        rows = self._query(
            f"SELECT {COLUMNS} FROM exactly_once.records WHERE id = ANY(%s)",  # noqa: S608
            (list(ids),),
        )
        found = {ids[row["id"]]: record_from_row(row) for row in rows}
        return {key: found.get(key) for key in keys}

    def apply_effect(self, ctx: RecordContext) -> bool:
        from exactly_once.stores.postgres.ledger import record_effect

        return record_effect(ctx, {"fence": ctx.fence}) is not None

    def effect_fences(self, scope: str, key: str) -> set[int]:
        rows = self._query(
            "SELECT fence FROM exactly_once.ledger WHERE pk = %s AND sk = %s",
            (key, f"{scope}#effect"),
        )
        return {int(row["fence"]) for row in rows}

    def sweep(self, scope: str, key: str, now_s: float) -> None:
        from exactly_once.stores.postgres.cleanup import delete_expired

        delete_expired(self.dsn, now_s=now_s)


@pytest.fixture(params=["dynamodb", "postgres"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Backend]:
    # Retries wait for nothing: the model's time is the fake clock.
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)
    monkeypatch.setattr(
        completion_module, "time", SimpleNamespace(time=lambda: 0.0, sleep=lambda _: None)
    )
    if request.param == "dynamodb":
        from local_aws.tables import create_idempotency_table, create_ledger_table

        ddb = request.getfixturevalue("ddb")
        endpoint = request.getfixturevalue("dynamodb_local").endpoint
        table, effects = f"sm-{uuid.uuid4().hex[:8]}", f"sm-effects-{uuid.uuid4().hex[:8]}"
        create_idempotency_table(ddb, table)
        create_ledger_table(ddb, effects)
        yield DynamoDBBackend(endpoint, ddb, table, effects)
        return
    monkeypatch.setattr(
        "exactly_once.stores.postgres.base.time",
        SimpleNamespace(time=time.time, sleep=lambda _: None),
    )
    # An effect blocked behind a zombie's open transaction gives up sooner than in production;
    # its own pool (another application_name), so the shorter timeout stays in this test.
    monkeypatch.setenv("IDEMPOTENCY_PG_LOCK_TIMEOUT_MS", "100")
    backend = PostgresBackend(request.getfixturevalue("pg_dsn") + " application_name=state-machine")
    yield backend
    backend.close()


def test_the_store_keeps_its_promises_on_both_backends(backend: Backend) -> None:
    machine = type(f"{backend.name.title()}StateMachine", (StateMachine,), {"backend": backend})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=int(os.environ.get("EO_MODEL_EXAMPLES", "60")),
            stateful_step_count=int(os.environ.get("EO_MODEL_STEPS", "30")),
            derandomize=os.environ.get("EO_MODEL_RANDOM") != "1",
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


@pytest.mark.parametrize(
    "steps",
    [
        # The first execution's replay after a takeover must not resume the successor's lock.
        (("hold", 0, "k0", "e1"), ("advance",), ("hold", 1, "k0", None), ("hold", 0, "k0", "e1")),
        # A replay in another process while the first invocation runs: the first is fenced out.
        (("hold", 0, "k0", "e1"), ("hold", 1, "k0", "e1"), ("write", 0), ("write", 1)),
        # A fork while the holder's effect waits in its transaction: every write of the
        # child's is refused, its discard ends nothing, and the parent's effect commits.
        (
            ("hold", 0, "k0", None),
            ("effect", 0),
            *(("fork", 0, write) for write in CLONE_WRITES),
            ("write", 0),
        ),
        # A durable holder suspends after its effect; its replay (in another process) resumes
        # the lock, before and after the lease ran out, and the suspended writes are refused.
        (
            ("hold", 0, "k0", "e1"),
            ("effect", 0),
            ("suspend", 0),
            ("resume", "k0", 1),
            ("suspend", 1),
            ("advance",),
            ("resume", "k0", 0),
            ("effect", 0),
            ("write", 0),
        ),
    ],
    ids=[
        "takeover-then-replay",
        "replay-beside-its-first-invocation",
        "fork-while-holding",
        "durable-suspend-and-replay",
    ],
)
def test_the_resume_scenarios_the_search_may_take_long_to_reach(
    backend: Backend, steps: tuple[tuple[Any, ...], ...]
) -> None:
    """The model's own rules and checks, driven through resume_id, fork and suspension
    scenarios explicitly."""
    machine = type(f"{backend.name.title()}StateMachine", (StateMachine,), {"backend": backend})()
    machine.configure(block=False)
    for step in steps:
        if step[0] == "hold":
            machine.hold(*step[1:])
        elif step[0] == "advance":
            machine.advance(LEASE_MS / 1000 + 1)
        elif step[0] == "effect":
            machine._effect(step[1])
        elif step[0] == "fork":
            machine._fork(step[1], step[2])
        elif step[0] == "suspend":
            machine._suspend(step[1])
        elif step[0] == "resume":
            machine._resume(step[1], step[2])
        else:
            machine._write(step[1], "complete")
        machine.at_most_one_effect_per_key()
        machine.no_effect_without_its_completion()
        machine.at_most_one_live_holder_per_key()
        machine.a_completed_record_never_goes_back()
    machine.teardown()
