"""The steps under interleavings and faults, on BOTH stores: a stateful property test.

For two keys, each with a fixed program of three steps (charge and email with a durable
effect, ship without one), hypothesis interleaves: holders that acquire a key (`begin`) and
run their next step, with the step's write meeting a fault at random (a reply lost and
recognised, a write refused by a throttle or a dropped connection, every reply lost after it
committed, the process dying inside the step's fn or after it and before the write); holders
abandoned between steps or failed retryably (the next holder resumes in the same
generation); clock jumps past a lease (takeovers, so earlier holders become
zombies that still try their next step) and past the TTL (a new generation); completions.

A step's durable effect commits with its recovery point (steps_support.py): on DynamoDB an
item put by the step (its TransactWriteItems), on PostgreSQL a row inserted in
`step.transaction`. Each run of a step's fn is counted. Invariants:

- per (key, generation, position) at most one recovery point ever, never replaced, and its
  durable effect exactly once: a point has its effect (same fence, same run), an effect has
  its point, and no position's effect commits twice;
- a finished step's fn never runs again for the key's holder (a current holder that finds
  the point gets its result back); a step that ran and returned wrote its point at its own
  fence; a zombie's step is never reported written (LeaseLost, or the fault's error);
- a step whose write committed while its replies were lost keeps that result: its holder's
  next call returns it without running fn;
- every run of a (key, generation, position) hands the provider the same step key;
- a COMPLETED record has every step's point.

`test_the_model_bites` runs the same machine against three broken libraries and must fail.
"""

from __future__ import annotations

import itertools
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.retries.standard import ExponentialBackoff
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from exactly_once import begin
from exactly_once import completion as completion_module
from exactly_once.errors import CommitFailed, CommitUnknown, LeaseLost
from exactly_once.held_lock import OnceLock
from exactly_once.steps.runner import StepRun, steps_of
from exactly_once.steps.step import Step
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import StepPoint, StoredRecord, WriteResult, WriteStatus
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock
from tests.steps.steps_support import (
    DdbEffects,
    Effects,
    Faults,
    PgEffects,
    ddb_store,
    pg_store,
)

KEYS = ("k0", "k1")
PROGRAM = (("charge", True), ("ship", False), ("email", True))  # (name, durable effect)
LEASE_S = 10
TTL_S = 120
FAULTS = ("none", "lose", "refuse", "lose_all", "crash_in_fn", "crash_before_write")
CRASHES = ("crash_in_fn", "crash_before_write")


class Crash(BaseException):
    """The process dies here (a BaseException: nothing of the library's catches it)."""


@dataclass
class Backend:
    """One store under test: how to build it on a clock, its raw reads and its effects."""

    name: str
    make: Callable[[FakeClock, Faults], Store]
    raw: Callable[[str, str], StoredRecord | None]
    effects: Effects


@dataclass
class Holder:
    key: str
    lock: OnceLock
    done: int = 0  # the steps it has finished (called and returned), in program order

    @property
    def token(self) -> str:
        return self.lock.store_lock.token


@dataclass
class Run:
    """One run of a step's fn."""

    generation: int
    fence: int
    tag: str
    fn_ran: bool = True


class StepsModel(RuleBasedStateMachine):
    backend: Backend

    def __init__(self) -> None:
        super().__init__()
        self.scope = f"sm-{uuid.uuid4().hex[:10]}"
        self.clock = FakeClock()
        self.faults = Faults()
        self.store = self.backend.make(self.clock, self.faults)
        self.holders: list[Holder] = []
        self.tags = itertools.count()
        self.max_fence: dict[str, int] = {}
        # (key, generation, position) -> (fence, tag) of its recovery point, once seen
        self.point_of: dict[tuple[str, int, int], tuple[int, str]] = {}
        self.step_keys: dict[tuple[str, int, int], str] = {}

    # -- holders -----------------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS))
    def acquire(self, key: str) -> None:
        before = self.backend.raw(self.scope, key)
        claim = begin(self.scope, key, store=self.store, lease_s=LEASE_S)
        if not claim.acquired:
            assert before is not None, f"{key}: refused with no record ({claim.status})"
            return
        if before is not None and not before.is_expired(self.clock()):
            assert before.status is not Status.COMPLETED, f"{key}: a completed key was acquired"
        assert claim.lock.fence > self.max_fence.get(key, 0), "the fence went back"
        self.max_fence[key] = claim.lock.fence
        self.holders.append(Holder(key, claim.lock))

    @rule(key=st.sampled_from(KEYS))
    def takeover(self, key: str) -> None:
        """The key's holders freeze past their lease; the next caller takes it over."""
        self.clock.advance(LEASE_S + 1)
        self.acquire(key)

    @rule(key=st.sampled_from(KEYS), fault=st.sampled_from(FAULTS))
    def zombie(self, key: str, fault: str) -> None:
        """A holder runs a step, freezes past its lease, the key is taken over, and then the
        holder (a zombie now) runs its next step: the scenario the fence is for, in one rule
        so that the search meets it often."""
        held = len(self.holders)
        self.acquire(key)
        if len(self.holders) == held:
            return  # refused: the key is held, or done
        frozen = self.holders[-1]
        self._step(frozen, "none")
        self.takeover(key)
        if frozen in self.holders and frozen.done < len(PROGRAM):
            self._step(frozen, fault)

    @precondition(lambda self: any(h.done < len(PROGRAM) for h in self.holders))
    @rule(data=st.data(), fault=st.sampled_from(FAULTS), retry=st.booleans())
    def step(self, data: st.DataObject, fault: str, retry: bool) -> None:
        """A holder runs its next step; with `retry`, a step that raised is tried again at
        once (by the holder that saw it raise, which may have committed it)."""
        holder = data.draw(st.sampled_from([h for h in self.holders if h.done < len(PROGRAM)]))
        if self._step(holder, fault) == "error" and retry:
            self._step(holder, "none")

    def _step(self, holder: Holder, fault: str) -> str:
        """The holder's next step with `fault`, checked; returns its outcome."""
        position = holder.done + 1
        name, durable = PROGRAM[position - 1]
        before = self.backend.raw(self.scope, holder.key)
        if before is not None:
            self._observe(holder.key, before)  # a retry comes before the invariants' look
        expired = before is not None and before.is_expired(self.clock())
        current = (
            before is not None
            and before.lock_token == holder.token
            and before.status is Status.IN_PROGRESS
            and not expired
        )
        finished = before.steps.get(position) if current and before is not None else None
        runs: list[Run] = []
        tag = f"t{next(self.tags)}"

        def fn(step: Step) -> dict[str, Any]:
            generation = steps_of(holder.lock).generation
            where = (holder.key, generation, position)
            assert self.step_keys.setdefault(where, step.idempotency_key) == (
                step.idempotency_key
            ), f"{where}: another step key for the same step"
            assert finished is None, f"{where}: a finished step's fn ran again in its holder"
            runs.append(Run(generation, step.fence, tag))
            if durable:
                self.backend.effects.write(step, holder.lock, tag)
            if fault == "crash_in_fn":
                raise Crash
            return {"tag": tag, "position": position}

        self._arm(fault, durable)
        outcome: str
        try:
            result = holder.lock.step(name, fn)
            outcome = "ok"
        except LeaseLost:
            outcome = "lost"
        except Crash:
            outcome = "crash"
        except (ClientError, CommitFailed, CommitUnknown):
            outcome = "error"
        finally:
            self.faults.clear()
            self.store.__dict__.pop("record_step", None)
        event(f"step {'current' if current else 'zombie'} {fault} -> {outcome}")
        if outcome == "error":
            assert fault in {"refuse", "lose_all"}, f"a step failed with no fault ({fault})"
        after = self.backend.raw(self.scope, holder.key)
        point = after.steps.get(position) if after is not None else None
        generation = steps_of(holder.lock).generation
        mine = point is not None and point.fence == holder.lock.fence
        if outcome == "crash":
            self._die(holder)
            kept = before.steps.get(position) if before is not None else None
            assert point == kept, f"{holder.key}#{position}: a crashed step's point was written"
            return outcome
        if outcome == "ok":
            if runs:  # fn ran: its point is written, at its own fence, with its result
                zombie = not current and not expired
                assert not zombie, f"{holder.key}#{position}: a zombie's step was reported written"
                assert point is not None, (
                    f"{holder.key}#{position}: a zombie's step was reported written"
                )
                assert mine, f"{holder.key}#{position}: a zombie's step was reported written"
                assert point.result == result, "the step returned what it did not keep"
            else:  # resumed: the point that was kept
                fence_tag = self.point_of.get((holder.key, generation, position))
                assert fence_tag is not None, "a step returned a result that was never kept"
                assert result["tag"] == fence_tag[1], "a resumed holder got another result"
            holder.done = position
            return outcome
        if current and fault in {"none", "lose"}:
            raise AssertionError(f"the key's holder failed its step: {outcome} ({fault})")
        if outcome == "error" and fault == "lose_all" and current and runs:
            assert mine, "every reply was lost, and the step was not written"
            assert point is not None
            assert point.result["tag"] == tag, "every reply was lost, and another result kept"
        elif outcome == "error" and current:
            assert not mine, "a refused step's point was written"
        if outcome == "lost" and not expired:
            assert not current, "a holder was told it lost a key it holds"
        return outcome

    def _arm(self, fault: str, durable: bool) -> None:
        dynamodb = self.backend.name == "dynamodb"
        if fault == "lose":
            self.faults.lose = 1
        elif fault == "refuse" and dynamodb:
            if durable:
                self.faults.cancel = 1000  # a TransactionCanceled with a ThrottlingError
            else:
                self.faults.throttle = 1000
        elif fault == "refuse":
            self.faults.fail = 1  # the connection drops before the COMMIT
        elif fault == "lose_all" and dynamodb:
            self.faults.lose = 1000
        elif fault == "lose_all":
            self.faults.lose, self.faults.unreadable_after_lose = 1, 1000
        elif fault == "crash_before_write":

            def crash(*_: Any, **__: Any) -> WriteResult:
                raise Crash

            self.store.record_step = crash  # type: ignore[method-assign]

    def _die(self, holder: Holder) -> None:
        """The holder's process is gone: its open transactions with it."""
        lock = holder.lock.store_lock
        self.store.discard_step(lock)
        self.store.discard(lock)
        self.holders.remove(holder)

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def abandon(self, data: st.DataObject) -> None:
        """A holder dies between two steps."""
        self._die(data.draw(st.sampled_from(self.holders)))

    @precondition(lambda self: any(h.done == len(PROGRAM) for h in self.holders))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        holder = data.draw(st.sampled_from([h for h in self.holders if h.done == len(PROGRAM)]))
        before = self.backend.raw(self.scope, holder.key)
        current = (
            before is not None
            and before.lock_token == holder.token
            and before.status is Status.IN_PROGRESS
            and not before.is_expired(self.clock())
        )
        try:
            holder.lock.succeed({"steps": len(PROGRAM)})
        except LeaseLost:
            assert not current, "the key's holder could not complete"
        self.holders.remove(holder)

    @precondition(lambda self: self.holders)
    @rule(data=st.data())
    def fail_retryable(self, data: st.DataObject) -> None:
        """A holder records a retryable failure between steps: the next `begin` takes the key
        at once, in the same generation, and resumes after the finished steps."""
        holder = data.draw(st.sampled_from(self.holders))
        before = self.backend.raw(self.scope, holder.key)
        current = (
            before is not None
            and before.lock_token == holder.token
            and before.status is Status.IN_PROGRESS
            and not before.is_expired(self.clock())
        )
        try:
            holder.lock.fail("downstream timed out", retryable=True)
        except LeaseLost:
            assert not current, "the key's holder could not fail it"
        self._die(holder)
        after = self.backend.raw(self.scope, holder.key)
        if current and before is not None and after is not None:
            assert after.steps == before.steps, "a failure changed the key's recovery points"

    @rule(seconds=st.sampled_from((1.0, LEASE_S + 1.0, TTL_S + LEASE_S + 61.0)))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def each_step_once_with_its_effect(self) -> None:
        for key in KEYS:
            record = self.backend.raw(self.scope, key)
            rows = self.backend.effects.rows(self.scope, key)
            places = [(g, p) for g, p, _f, _t in rows]
            assert len(places) == len(set(places)), f"{key}: a step's effect committed twice"
            effects = {(g, p): (f, t) for g, p, f, t in rows}
            if record is not None and record.created_at_ms is not None:
                self._check_generation(key, record, effects)
            for (generation, position), fence_tag in effects.items():
                # every effect is its step's, whose point was seen while its generation lived
                where = (key, generation, position)
                assert self.point_of.get(where) == fence_tag, f"{where}: an effect with no point"

    def _observe(self, key: str, record: StoredRecord) -> None:
        """Remember the record's points: each (key, generation, position) keeps its first."""
        generation = record.created_at_ms
        assert generation is not None
        for position, point in record.steps.items():
            kept = (point.fence, point.result["tag"])
            where = (key, generation, position)
            assert self.point_of.setdefault(where, kept) == kept, f"{where}: a point replaced"

    def _check_generation(
        self, key: str, record: StoredRecord, effects: dict[tuple[int, int], tuple[int, str]]
    ) -> None:
        self._observe(key, record)
        generation = record.created_at_ms
        assert generation is not None
        for position, (_name, durable) in enumerate(PROGRAM, start=1):
            point = record.steps.get(position)
            effect = effects.get((generation, position))
            if not durable:
                assert effect is None
                continue
            if point is None:
                assert effect is None, f"{key}#{position}: an effect without its point"
            else:
                assert effect == (point.fence, point.result["tag"]), (
                    f"{key}#{position}: a point without its own effect ({effect})"
                )
        if record.status is Status.COMPLETED:
            assert sorted(record.steps) == [1, 2, 3], f"{key}: completed without every step"

    def teardown(self) -> None:
        for holder in list(self.holders):
            self._die(holder)


# -- the backends ----------------------------------------------------------------------------


def _dynamodb(request: pytest.FixtureRequest) -> Backend:
    from exactly_once.stores import schema

    endpoint = request.getfixturevalue("dynamodb_local").endpoint
    ddb = request.getfixturevalue("ddb")
    table = request.getfixturevalue("idempotency_table")

    def raw(scope: str, key: str) -> StoredRecord | None:
        item = ddb.get_item(
            TableName=table,
            Key={schema.PARTITION_KEY: {"S": f"{scope}#{key}"}},
            ConsistentRead=True,
        ).get("Item")
        return StoredRecord.from_item(dict(item)) if item else None

    return Backend(
        "dynamodb",
        lambda clock, faults: ddb_store(
            endpoint, table, clock, faults, record_ttl_s=TTL_S, failed_ttl_s=TTL_S
        ),
        raw,
        DdbEffects(ddb, request.getfixturevalue("ledger_table")),
    )


def _postgres(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Backend:
    import psycopg
    from psycopg.rows import dict_row

    from exactly_once.stores.postgres.rows import COLUMNS, record_from_row

    monkeypatch.setattr(
        "exactly_once.stores.postgres.base.time",
        SimpleNamespace(time=time.time, sleep=lambda _: None),
    )
    dsn = request.getfixturevalue("pg_dsn")
    effects = PgEffects(dsn).create()
    request.addfinalizer(effects.close)
    reads = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)
    request.addfinalizer(reads.close)

    def raw(scope: str, key: str) -> StoredRecord | None:
        rows = reads.execute(
            f"SELECT {COLUMNS} FROM exactly_once.records WHERE id = %s",  # noqa: S608
            (f"{scope}#{key}",),
        ).fetchall()
        return record_from_row(rows[0]) if rows else None

    return Backend(
        "postgres",
        lambda clock, faults: pg_store(dsn, clock, faults, record_ttl_s=TTL_S, failed_ttl_s=TTL_S),
        raw,
        effects,
    )


@pytest.fixture(params=["dynamodb", "postgres"])
def model_backend(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    # Retries wait for nothing: the model's time is the fake clock.
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)
    monkeypatch.setattr(
        completion_module, "time", SimpleNamespace(time=time.time, sleep=lambda _: None)
    )
    if request.param == "dynamodb":
        yield _dynamodb(request)
    else:
        yield _postgres(request, monkeypatch)


def _settings(examples: int, steps: int, *, bites: bool = False) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=os.environ.get("EO_MODEL_RANDOM") != "1",
        deadline=None,
        database=None,
        phases=[Phase.generate] if bites else list(Phase),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=False,
    )


def test_each_step_runs_once_with_its_effect_on_both_stores(model_backend: Backend) -> None:
    machine = type(
        f"{model_backend.name.title()}StepsModel", (StepsModel,), {"backend": model_backend}
    )
    run_state_machine_as_test(
        machine,
        settings=_settings(
            int(os.environ.get("EO_STEPS_MODEL_EXAMPLES", "30")),
            int(os.environ.get("EO_STEPS_MODEL_STEPS", "40")),
        ),
    )


# -- the model bites: the same machine against broken steps -----------------------------------


def _store_class(name: str) -> type[Any]:
    if name == "dynamodb":
        from exactly_once.stores.dynamodb.store import IdempotencyStore

        return IdempotencyStore
    from exactly_once.stores.postgres.store import PostgresStore

    return PostgresStore


def report_a_zombie_written(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A refused step write (the key has a newer holder) is answered OK."""
    cls = _store_class(name)
    record_step = cls.record_step

    def lying(self: Any, lock: Any, point: StepPoint, writes: Any = ()) -> WriteResult:
        written = record_step(self, lock, point, writes)
        return WriteResult(WriteStatus.OK, lock=lock) if not written.ok else written

    monkeypatch.setattr(cls, "record_step", lying)


def weaken_the_fence(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The step's write is fenced on IN_PROGRESS alone, not on the holder's token."""
    if name == "dynamodb":
        from exactly_once.stores.dynamodb import steps

        monkeypatch.setattr(
            steps, "_CONDITION", "(#tok = :tok OR #st = :ip) AND attribute_not_exists(#sp)"
        )
        return
    from exactly_once.stores.postgres import statements

    fenced = "lock_token = %(tok)s AND "
    assert fenced in statements.STEP_AND_COMMIT
    monkeypatch.setattr(
        statements, "STEP_AND_COMMIT", statements.STEP_AND_COMMIT.replace(fenced, "")
    )


def resume_without_reading(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A holder does not read the points earlier holders of the generation kept."""
    points = StepRun._points

    def forgetful(self: StepRun, store: Store, lock: Any) -> dict[int, StepPoint]:
        fresh = self._record is None or self._token != lock.token
        found = points(self, store, lock)
        if fresh:
            self._done = {}
            return self._done
        return found

    monkeypatch.setattr(StepRun, "_points", forgetful)


def forget_an_ambiguous_write(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A holder whose step write raised keeps what it read before (as before 2e8f634): a
    write that committed with every reply lost is not seen, and its fn runs again."""
    record_point = StepRun._record_point

    def keeping(self: StepRun, *args: Any) -> None:
        record = self._record
        try:
            record_point(self, *args)
        except BaseException:
            self._record = record
            raise

    monkeypatch.setattr(StepRun, "_record_point", keeping)


BREAKS: dict[str, Callable[[pytest.MonkeyPatch, str], None]] = {
    "ambiguous-write-forgotten": forget_an_ambiguous_write,
    "zombie-reported-written": report_a_zombie_written,
    "fence-weakened": weaken_the_fence,
    "resumed-without-reading": resume_without_reading,
}


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_the_model_bites(model_backend: Backend, broken: str) -> None:
    machine = type(
        f"Broken{model_backend.name.title()}StepsModel",
        (StepsModel,),
        {"backend": model_backend},
    )
    bitten = (
        r"a zombie's step was reported written|a finished step's fn ran again|"
        r"a point replaced|committed twice|an effect with no point|failed its step|"
        r"a crashed step's point was written|without its (own effect|point)"
    )
    with pytest.MonkeyPatch.context() as patch:
        BREAKS[broken](patch, model_backend.name)
        with pytest.raises(AssertionError, match=bitten):
            run_state_machine_as_test(machine, settings=_settings(200, 30, bites=True))
