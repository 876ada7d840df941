"""A stateful property test of the store's promises against DynamoDB Local (hypothesis).

Hypothesis interleaves, for two keys: message deliveries through the record processor (whose
business function applies a fenced effect, then succeeds, raises, fails permanently or raises
a BaseException) as a queue record, as an SNS envelope in a queue record, or as a notification
to a subscribed Lambda (one state machine for all three); hand-driven holders that acquire,
apply the effect, complete, fail, extend or die between any two steps (zombies); clock jumps
past a lease and past the TTL, the TTL sweep, lost replies (the write commits, botocore
retries it) and throttles past botocore's retries, and replays of dead-lettered messages.
Batches (tests/stores/batch_model.py) acquire several keys in one `acquire_many` and finish
several holders, zombies and finished locks in one `finish_many`, with the reply of the whole
BatchExecuteStatement lost at random; each key's answer, and every single `acquire`, is held
to the same prediction from the record before the call. After every step it checks the
invariants:

- at most one fenced effect per key, and a processed message's effect exists;
- a key whose record is COMPLETED and live never runs again;
- a record IN_PROGRESS past its lease is taken by the next delivery (never stuck);
- the fence strictly increases per key, across takeovers, generations and deletion;
- no key is granted while another grant's lease lives, whoever asked (every path);
- a COMPLETED record stays as completed while it lives, and a refused write changes nothing;
- every message is succeeded, reported failed, or in the DLQ with its reason.

`make test` runs a bounded, derandomised exploration; `make model` a long one
(`EO_MODEL_EXAMPLES`, `EO_MODEL_STEPS`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

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
from exactly_once.errors import LockInherited, PermanentError
from exactly_once.outcomes import Outcome, RecordResult
from exactly_once.sns.messages import from_lambda_record
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.context import RecordContext
from exactly_once.sqs.messages import SqsMessage
from exactly_once.sqs.processor import RecordProcessor
from exactly_once.stores import schema
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.records import AcquireStatus, Acquisition, ErrorInfo, Lock, StoredRecord
from exactly_once.stores.schema import Status
from fault_injection.lost_replies import install_lost_replies
from fault_injection.throttling import install_throttling
from local_aws.tables import create_idempotency_table, create_ledger_table
from tests.conftest import FakeClock, make_ddb_client
from tests.stores.batch_model import (
    BATCH_KEYS,
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

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

KEYS = ("k0", "k1")
WORKERS = (0, 1)
LEASE_MS = 10_000
# A stored HTTP response (exactly_once.http.response), with text that is valid JSON but awkward.
RESPONSE = {
    "status": 201,
    "headers": {"content-type": "application/json", "__eo_set__": "look-alike"},
    "multiValueHeaders": {},
    "cookies": ["s=\ud83d"],
    "body": '{"note": "\ud83d", "n": ' + "9" * 500 + "}",
    "isBase64Encoded": False,
}
TTL_S = 120
ATTEMPTS = 2  # botocore attempts per call: a lost reply is retried once, a throttle twice
BEHAVIOURS = ("ok", "raise", "permanent", "cancel")


@dataclass
class Env:
    endpoint: str
    ddb: DynamoDBClient
    table: str
    effects: str


ENV: Env | None = None


@dataclass
class Faults:
    """What the next requests of the store's client meet; `fired` says one happened."""

    lose: int = 0
    throttle: int = 0
    lose_batch: int = 0  # the next BatchExecuteStatement's reply (batch_model)
    fired: bool = False

    def take_lose(self, operation: str) -> bool:
        if self.lose > 0 and operation in {"UpdateItem", "PutItem", "TransactWriteItems"}:
            self.lose -= 1
            self.fired = True
            return True
        return False


class _ThrottleDraws:
    """An `rng` for install_throttling that throttles while the armed count lasts."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults

    def random(self) -> float:
        if self.faults.throttle > 0:
            self.faults.throttle -= 1
            self.faults.fired = True
            return 0.0
        return 0.99


@dataclass
class FakeDeadLetterQueue:
    """Stands in for SQS: the processor only calls send_message on it here."""

    sent: list[dict[str, Any]] = field(default_factory=list)

    def send_message(self, **params: Any) -> dict[str, str]:
        self.sent.append(params)
        return {"MessageId": str(uuid.uuid4())}


def _attribute(params: dict[str, Any], name: str) -> str | None:
    attributes = params.get("MessageAttributes", {})
    if name in attributes:
        return str(attributes[name]["StringValue"])
    packed = attributes.get("eo-failure")
    if packed:
        value = json.loads(packed["StringValue"]).get(name)
        return str(value) if value is not None else None
    return None


def _notification(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:sales",
        "Message": json.dumps(message),
    }


def _record(body: dict[str, Any], attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "body": json.dumps(body),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": attributes or {},
    }


class StoreMachine(BatchRules, RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        assert ENV is not None
        self.env = ENV
        self.scope = f"model-{uuid.uuid4().hex[:10]}"
        self.clock = FakeClock()
        self.faults = Faults()
        client = make_ddb_client(ENV.endpoint, max_attempts=ATTEMPTS)
        install_throttling(client, 0.5, _ThrottleDraws(self.faults))  # type: ignore[arg-type]
        install_lost_replies(client, self.faults.take_lose)
        install_lost_batch_replies(client, self.faults)
        self.store = IdempotencyStore(
            ENV.table, client=client, clock=self.clock, record_ttl_s=TTL_S, failed_ttl_s=TTL_S
        )
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
        self.max_fence: dict[str, int] = {}
        self.effect_fences: dict[str, set[int]] = {key: set() for key in KEYS}
        self.running: str | None = None  # the key whose delivery is running the handler now
        self.behaviour = "ok"
        self.ran = False

    @initialize(block=st.booleans())
    def configure(self, block: bool) -> None:
        self.block = block
        config = ConsumerConfig(
            table_name=self.env.table,
            scope=self.scope,
            dead_letter_queue_url="https://sqs.local/123456789012/dlq",
            fingerprint=False,
            sns_envelope="auto",
            block_takeover=block,
            record_ttl_s=TTL_S,
            failed_ttl_s=TTL_S,
        )
        self.processor = RecordProcessor(self._business, "id", config, self.store, self.dlq)  # type: ignore[arg-type]

    # -- what a delivery runs --------------------------------------------------------------

    def _business(self, body: Any, ctx: RecordContext) -> str:
        self.ran = True
        self._saw_fence(ctx.key, ctx.fence)
        if put_once(ctx, self.env.effects, self._effect_item(ctx.key)):
            self.effect_fences[ctx.key].add(ctx.fence)
        if self.behaviour == "raise":
            raise TimeoutError("downstream timed out")
        if self.behaviour == "permanent":
            raise PermanentError("declined")
        if self.behaviour == "cancel":
            raise SystemExit(1)  # a BaseException from a library
        return "done"

    def _effect_item(self, key: str) -> dict[str, Any]:
        return {"pk": {"S": f"{self.scope}#{key}"}, "sk": {"S": "effect"}}

    def _saw_fence(self, key: str, fence: int) -> None:
        assert fence > self.max_fence.get(key, 0), (key, fence, self.max_fence)
        self.max_fence[key] = fence

    def _raw(self, key: str) -> StoredRecord | None:
        got = self.env.ddb.get_item(
            TableName=self.env.table,
            Key={schema.PARTITION_KEY: {"S": schema.record_id(self.scope, key)}},
            ConsistentRead=True,
        ).get("Item")
        return StoredRecord.from_item(dict(got)) if got else None

    def _raw_record(self, key: str) -> StoredRecord | None:
        return self._raw(key)

    def _raw_records(self, keys: Sequence[str]) -> dict[str, StoredRecord | None]:
        return ddb_raw_many(self.env.ddb, self.env.table, self.scope, keys)

    def _live(self, record: StoredRecord | None) -> bool:
        return record is not None and not record.is_expired(self.clock())

    def _effect_exists(self, key: str) -> bool:
        item = self.env.ddb.get_item(
            TableName=self.env.effects, Key=self._effect_item(key), ConsistentRead=True
        ).get("Item")
        return bool(item)

    # -- deliveries through the processor --------------------------------------------------

    def _deliver(
        self, key: str, record: dict[str, Any], behaviour: str, *, sns: bool = False
    ) -> RecordResult:
        assert self.processor is not None
        before = self._raw(key)
        self.behaviour, self.ran, self.faults.fired = behaviour, False, False
        sent_before = len(self.dlq.sent)
        message = from_lambda_record(record) if sns else SqsMessage.from_record(record)
        result = self.processor.process(message, None)
        now_ms = int(self.clock() * 1000)

        if self._live(before) and before is not None and before.status is Status.COMPLETED:
            assert not self.ran, f"{key} ran again while its COMPLETED record lives"
        stuck = (
            self._live(before)
            and before is not None
            and before.status is Status.IN_PROGRESS
            and before.lease_expired(now_ms)
        )
        if stuck and not self.faults.fired:
            assert result.outcome is not Outcome.IN_PROGRESS, f"{key} stuck past its lease"
        # every message: succeeded, reported failed, or in the DLQ with its reason
        if result.outcome is Outcome.PERMANENT:
            assert not result.report_failure
            assert result.dead_lettered
            [sent] = self.dlq.sent[sent_before:]
            assert _attribute(sent, "eo-error-type")
        elif not result.report_failure:
            assert result.outcome in {Outcome.PROCESSED, Outcome.DUPLICATE}, result
        if result.outcome is Outcome.PROCESSED:
            assert self._effect_exists(key), f"{key} processed without its effect"
        return result

    @rule(key=st.sampled_from(KEYS), behaviour=st.sampled_from(BEHAVIOURS))
    def deliver(self, key: str, behaviour: str) -> None:
        self._deliver(key, _record({"id": key}), behaviour)

    @rule(key=st.sampled_from(KEYS), behaviour=st.sampled_from(BEHAVIOURS))
    def deliver_fanned_out(self, key: str, behaviour: str) -> None:
        """SNS -> SQS without raw delivery: the key is inside the envelope's Message."""
        self._deliver(key, _record(_notification({"id": key})), behaviour)

    @rule(key=st.sampled_from(KEYS), behaviour=st.sampled_from(BEHAVIOURS))
    def notify(self, key: str, behaviour: str) -> None:
        """A Lambda subscribed to the topic: the event's Records[].Sns."""
        sns = {**_notification({"id": key}), "MessageAttributes": {}}
        self._deliver(key, {"EventSource": "aws:sns", "Sns": sns}, behaviour, sns=True)

    @precondition(lambda self: bool(self.dlq.sent))
    @rule(data=st.data(), forge=st.booleans())
    def replay(self, data: st.DataObject, forge: bool) -> None:
        """Send a dead-lettered message back, or a producer's look-alike of one."""
        sent = data.draw(st.sampled_from(self.dlq.sent))
        attributes = {
            name: {"stringValue": value["StringValue"], "dataType": "String"}
            for name, value in sent.get("MessageAttributes", {}).items()
        }
        if forge:
            attributes["eo-replay-nonce"] = {"stringValue": "f" * 32, "dataType": "String"}
        body = json.loads(sent["MessageBody"])
        # an envelope is dead-lettered as delivered; a notification as its Message
        key = json.loads(body["Message"])["id"] if "Message" in body else body["id"]
        before = self._raw(key)
        self._deliver(key, _record(body, attributes), "ok")
        permanent = (
            before is not None
            and before.status is Status.FAILED
            and not (before.error and before.error.retryable)
            and self._live(before)
        )
        if forge and permanent:
            assert not self.ran, "a forged replay re-ran a permanent failure"

    # -- hand-driven holders (they may stop between any two steps: zombies) ----------------

    @rule(
        worker=st.sampled_from(WORKERS),
        key=st.sampled_from(KEYS),
        expected=st.sampled_from((None, 1_000, LEASE_MS * 2)),  # `once`'s expected duration
    )
    def hold(self, worker: int, key: str, expected: int | None) -> None:
        self._hold(worker, key, expected)

    def _hold(
        self, worker: int, key: str, expected: int | None, execution: str | None = None
    ) -> Acquisition | None:
        """`hold`, for a durable execution too (`execution`, its resume_id); the acquisition,
        or None when the store could not be reached."""
        before = self._raw(key)
        expected_answer = predict_acquire(
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
                expected_duration_ms=expected,
                resume_id=execution,
            )
        except Exception:
            assert self.faults.fired
            return None
        # the very prediction each key of a batch is held to (batch_model)
        check_acquisition(got, expected_answer, before, self._raw(key), faulted=self.faults.fired)
        if got.status is AcquireStatus.ACQUIRED:
            assert got.lock is not None
            if self._live(before) and before is not None:
                assert before.status is not Status.COMPLETED, "a completed key was acquired"
            self._saw_fence(key, got.lock.fence)
            self.holders[worker] = (key, got.lock)
            self.executions[worker] = execution
            held = self._raw(key)
            if expected is not None and held is not None and held.lock_token == got.lock.token:
                now_ms = int(self.clock() * 1000)
                assert held.expected_by_ms == now_ms + expected
        return got

    def _held(self, worker: int) -> tuple[str, Lock]:
        held = self.holders[worker]
        assert held is not None
        return held

    @precondition(lambda self: any(self.holders.values()))
    @rule(data=st.data())
    def holder_effect(self, data: st.DataObject) -> None:
        worker = data.draw(st.sampled_from([w for w, h in self.holders.items() if h]))
        key, lock = self._held(worker)
        ctx = RecordContext("manual", key, lock.fence, lock.attempt, {}, None, self.store, lock)
        try:
            if put_once(ctx, self.env.effects, self._effect_item(key)):
                self.effect_fences[key].add(lock.fence)
        except LeaseLost:
            self.holders[worker] = None
        except Exception:
            assert self.faults.fired

    @precondition(lambda self: any(self.holders.values()))
    @rule(
        data=st.data(),
        action=st.sampled_from(("complete", "respond", "fail", "permanent", "extend")),
    )
    def holder_write(self, data: st.DataObject, action: str) -> None:
        worker = data.draw(st.sampled_from([w for w, h in self.holders.items() if h]))
        key, lock = self._held(worker)
        self.faults.fired = False
        try:
            if action == "complete":
                written = self.store.complete(lock, {"by": worker})
            elif action == "respond":  # what the HTTP entry point stores, hostile text and all
                written = self.store.complete(lock, RESPONSE)
            elif action == "extend":
                written = self.store.extend(lock, LEASE_MS)
            else:
                error = ErrorInfo("Manual", "by hand", retryable=action == "fail")
                written = self.store.fail(lock, error)
        except Exception:
            assert self.faults.fired  # throttled past the retries: it may try again
            return
        if not written.ok:
            self.holders[worker] = None
        elif action == "extend":
            assert written.lock is not None
            self.holders[worker] = (key, written.lock)
        else:
            self.holders[worker] = None

    @precondition(lambda self: any(self.holders.values()))
    @rule(worker=st.sampled_from(WORKERS))
    def holder_dies(self, worker: int) -> None:
        self.holders[worker] = None

    # -- clones and durable suspensions ----------------------------------------------------

    @precondition(lambda self: any(self.holders.values()))
    @rule(data=st.data(), write=st.sampled_from(("complete", "fail", "extend", "effect")))
    def fork(self, data: st.DataObject, write: str) -> None:
        """A holder's process forks: the child has the holder's Lock, taken by the
        parent, not its own (a copy taken by another process here). Whatever it writes with
        it is refused with LockInherited and changes nothing; the parent holds on."""
        self._fork(data.draw(st.sampled_from([w for w, h in self.holders.items() if h])), write)

    def _fork(self, worker: int, write: str) -> None:
        key, lock = self._held(worker)
        clone = forked_copy(lock)
        before, effect_before = self._raw(key), self._effect_exists(key)
        try:
            if write == "complete":
                self.store.complete(clone, {"by": "clone"})
            elif write == "fail":
                self.store.fail(clone, ErrorInfo("Clone", "x", retryable=False))
            elif write == "extend":
                self.store.extend(clone, LEASE_MS)
            else:
                ctx = RecordContext("clone", key, clone.fence, 1, {}, None, self.store, clone)
                put_once(ctx, self.env.effects, self._effect_item(key))
            refused = False
        except LockInherited:
            refused = True
        assert refused, f"a clone's {write} was not refused"
        assert (self._raw(key), self._effect_exists(key)) == (before, effect_before)

    @rule(
        worker=st.sampled_from(WORKERS),
        key=st.sampled_from(KEYS),
        execution=st.sampled_from(("e1", "e2")),
    )
    def durable_hold(self, worker: int, key: str, execution: str) -> None:
        """A durable execution takes the key (resume_id = its id)."""
        self._hold(worker, key, None, execution)

    @precondition(lambda self: any(h and self.executions[w] for w, h in self.holders.items()))
    @rule(data=st.data())
    def durable_suspend(self, data: st.DataObject) -> None:
        """A durable holder's invocation is suspended inside its block: no outcome is
        written, and the record stays IN_PROGRESS under its lock, for its replay."""
        durable = [w for w, h in self.holders.items() if h and self.executions[w]]
        self._suspend(data.draw(st.sampled_from(durable)))

    def _suspend(self, worker: int) -> None:
        key, lock = self._held(worker)
        execution = self.executions[worker]
        assert execution is not None
        self.holders[worker] = None
        assert_left_for_the_replay(self._raw(key), lock, execution)
        self.suspended[key] = (execution, lock)

    @precondition(lambda self: bool(self.suspended))
    @rule(data=st.data(), worker=st.sampled_from(WORKERS))
    def durable_resume(self, data: st.DataObject, worker: int) -> None:
        """The replay presents the same resume_id: while the record is still the suspended
        lock's it resumes it with a higher fence, and the suspended invocation's writes and
        effect are refused from then on."""
        self._resume(data.draw(st.sampled_from(sorted(self.suspended))), worker)

    def _resume(self, key: str, worker: int) -> None:
        execution, suspended = self.suspended.pop(key)
        own = still_suspended(self._raw(key), self.clock(), suspended)
        got = self._hold(worker, key, None, execution)
        if got is None or self.faults.fired:
            return  # unknown whether it was taken
        if own:
            assert_resumed(got, suspended)
        if self.max_fence[key] <= suspended.fence:
            return
        ctx = RecordContext("late", key, suspended.fence, 1, {}, None, self.store, suspended)
        effect_before = self._effect_exists(key)
        for action in ("extend", "fail", "complete", "effect"):
            self.faults.fired = False
            try:
                if action == "effect":
                    assert not put_once(ctx, self.env.effects, self._effect_item(key))
                    continue
                if action == "extend":
                    written = self.store.extend(suspended, LEASE_MS)
                elif action == "fail":
                    written = self.store.fail(suspended, ErrorInfo("Late", "x", retryable=True))
                else:
                    written = self.store.complete(suspended, {"by": "suspended"})
            except LeaseLost:
                continue
            except Exception:
                assert self.faults.fired
                continue
            assert not written.ok, f"the suspended invocation's {action} was written"
        assert self._effect_exists(key) == effect_before

    # -- time and faults -------------------------------------------------------------------

    @rule(seconds=st.sampled_from((1.0, LEASE_MS / 1000 + 1, TTL_S + LEASE_MS / 1000 + 61)))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(key=st.sampled_from(KEYS))
    def ttl_sweep(self, key: str) -> None:
        record = self._raw(key)
        if record is not None and record.is_expired(self.clock()):
            self.env.ddb.delete_item(
                TableName=self.env.table,
                Key={schema.PARTITION_KEY: {"S": schema.record_id(self.scope, key)}},
            )

    @rule()
    def lose_next_reply(self) -> None:
        self.faults.lose = 1

    @rule()
    def throttle_next_call(self) -> None:
        self.faults.throttle = ATTEMPTS  # every attempt of the next call

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def at_most_one_effect_per_key(self) -> None:
        """At most one holder of a key is ever told its effect was applied."""
        for key in KEYS:
            assert len(self.effect_fences[key]) <= 1, (key, self.effect_fences)

    @invariant()
    def expires_at_outlives_every_live_lease(self) -> None:
        for key in BATCH_KEYS:
            record = self._raw(key)
            if record is not None and record.status is Status.IN_PROGRESS:
                assert record.expires_at_s is not None
                assert record.lease_expires_at_ms is not None
                assert record.expires_at_s * 1000 > record.lease_expires_at_ms


@pytest.fixture
def env(dynamodb_local: DynamoDBLocal, ddb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch) -> Env:
    table, effects = f"model-{uuid.uuid4().hex[:8]}", f"effects-{uuid.uuid4().hex[:8]}"
    create_idempotency_table(ddb, table)
    create_ledger_table(ddb, effects)
    # Retries wait for nothing, and so do the processor's completion retries: the model's time
    # is the fake clock, and waiting would only slow the exploration down.
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)
    monkeypatch.setattr(
        completion_module, "time", SimpleNamespace(time=lambda: 0.0, sleep=lambda _: None)
    )
    return Env(dynamodb_local.endpoint, ddb, table, effects)


def test_the_store_keeps_its_promises_under_interleavings_and_faults(env: Env) -> None:
    global ENV
    ENV = env
    try:
        run_state_machine_as_test(
            StoreMachine,
            settings=settings(
                max_examples=int(os.environ.get("EO_MODEL_EXAMPLES", "25")),
                stateful_step_count=int(os.environ.get("EO_MODEL_STEPS", "30")),
                derandomize=os.environ.get("EO_MODEL_RANDOM") != "1",
                deadline=None,
                database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    finally:
        ENV = None


def test_a_fork_and_a_durable_suspension_the_search_may_take_long_to_reach(env: Env) -> None:
    """The model's own rules and checks, through a fork and a durable suspension explicitly:
    a durable holder forks (each write of the child's refused), suspends, and its replay in
    another process resumes the lock after its lease ran out; the suspended writes are refused."""
    global ENV
    ENV = env
    try:
        machine = StoreMachine()
        machine.configure(block=True)  # a resume is not a takeover to block
        machine._hold(0, "k0", None, "e1")
        for write in ("complete", "fail", "extend", "effect"):
            machine._fork(0, write)
        machine._suspend(0)
        machine.advance(LEASE_MS / 1000 + 1)
        machine._resume("k0", 1)
        assert machine.holders[1] is not None  # the replay holds the key again
        machine.at_most_one_effect_per_key()
        machine.expires_at_outlives_every_live_lease()
        machine.at_most_one_live_holder_per_key()
        machine.a_completed_record_never_goes_back()
        machine.teardown()
    finally:
        ENV = None
