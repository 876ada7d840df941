"""Every step write under its faults, on both stores, with a durable effect that commits with
the step's recovery point (tests/steps/steps_support.py).

- DynamoDB: the step's UpdateItem (no writes) or TransactWriteItems (with its writes) applied
  and its reply lost (botocore retries it: recognised as ours), throttled past botocore's
  retries, or cancelled with a ThrottlingError inside: nothing committed, the next holder runs
  the step again and its effect is still once.
- PostgreSQL: the COMMIT applied and its reply lost (settled by reading the row: OK), the
  connection dropped before the COMMIT (CommitFailed: the step's writes rolled back, it runs
  again once), the record unreadable after a lost reply (CommitUnknown).
- Both: the lease passing mid-step (a zombie's step is refused, its writes never commit), the
  TTL passing (a new generation: no steps, new step keys), a fork child's inherited lock
  (LockInherited), hostile results and names, a result over the cap (nothing written).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError
from botocore.retries.standard import ExponentialBackoff

from exactly_once import begin, lifecycle
from exactly_once import completion as completion_module
from exactly_once.errors import (
    CommitFailed,
    CommitUnknown,
    LeaseLost,
    LockInherited,
    StepResultUnstorable,
)
from exactly_once.held_lock import OnceLock
from exactly_once.steps.runner import INPUT, KEYED_INPUT, input_of, steps_of
from exactly_once.steps.step import Step
from exactly_once.stores import codec
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import StepPoint, StoredRecord
from tests.conftest import FakeClock
from tests.steps.steps_support import (
    DdbEffects,
    Effects,
    Faults,
    PgEffects,
    ddb_store,
    pg_store,
)

LEASE_S = 10
TTL_S = 120


@dataclass
class World:
    backend: str
    store: Store
    clock: FakeClock
    scope: str
    faults: Faults
    effects: Effects
    ran: list[tuple[int, str]]  # (fence, tag) of every run of a step's fn, in order

    def hold(self) -> OnceLock:
        claim = begin(self.scope, "k", store=self.store, lease_s=LEASE_S)
        assert claim.lock is not None, claim
        return claim.lock

    def step(self, holder: OnceLock, name: str, tag: str, *, write: bool = True) -> Any:
        """Run step `name`, whose fn records its run and (with `write`) its durable effect."""

        def fn(step: Step) -> dict[str, Any]:
            self.ran.append((step.fence, tag))
            if write:
                self.effects.write(step, holder, tag)
            return {"tag": tag, "fence": step.fence}

        return holder.step(name, fn)

    def record(self) -> StoredRecord:
        record = self.store.get_by_id(f"{self.scope}#k")
        assert record is not None
        return record

    def effect_tags(self) -> list[str]:
        return [tag for _g, _p, _f, tag in self.effects.rows(self.scope, "k")]


@pytest.fixture
def world(
    backend: str, request: pytest.FixtureRequest, scope: str, monkeypatch: pytest.MonkeyPatch
) -> World:
    # Retries wait for nothing: time here is the fake clock.
    monkeypatch.setattr(ExponentialBackoff, "delay_amount", lambda self, context: 0)
    monkeypatch.setattr(
        completion_module, "time", SimpleNamespace(time=time.time, sleep=lambda _: None)
    )
    clock, faults = FakeClock(), Faults()
    if backend == "dynamodb":
        endpoint = request.getfixturevalue("dynamodb_local").endpoint
        table = request.getfixturevalue("idempotency_table")
        store = ddb_store(endpoint, table, clock, faults, record_ttl_s=TTL_S)
        effects: Effects = DdbEffects(
            request.getfixturevalue("ddb"), request.getfixturevalue("ledger_table")
        )
    else:
        monkeypatch.setattr(
            "exactly_once.stores.postgres.base.time",
            SimpleNamespace(time=time.time, sleep=lambda _: None),
        )
        dsn = request.getfixturevalue("pg_dsn")
        store = pg_store(dsn, clock, faults, record_ttl_s=TTL_S)
        effects = PgEffects(dsn).create()
    return World(backend, store, clock, scope, faults, effects, [])


# -- lost replies --------------------------------------------------------------------------


@pytest.mark.parametrize("write", [False, True], ids=["no-writes", "with-writes"])
def test_a_lost_step_reply_is_recognised_as_ours(world: World, write: bool) -> None:
    """DynamoDB: the UpdateItem / TransactWriteItems applied, its reply lost, botocore's retry
    meets our own point. PostgreSQL: the COMMIT ran, its reply lost, the row says it did."""
    holder = world.hold()
    world.faults.lose = 1
    assert world.step(holder, "charge", "a", write=write) == {"tag": "a", "fence": holder.fence}
    assert [hit.split()[0] for hit in world.faults.hits] == ["lose"]
    assert world.ran == [(holder.fence, "a")]
    assert world.effect_tags() == (["a"] if write else [])
    point = world.record().steps[1]
    assert (point.name, point.fence, point.result) == (
        "charge",
        holder.fence,
        {"tag": "a", "fence": holder.fence},
    )
    # The holder goes on, and a takeover gets the result back without running it.
    assert world.step(holder, "ship", "b", write=write)["tag"] == "b"
    world.clock.advance(LEASE_S + 1)
    successor = world.hold()
    assert world.step(successor, "charge", "x")["tag"] == "a"
    assert world.step(successor, "ship", "x")["tag"] == "b"
    assert [tag for _f, tag in world.ran] == ["a", "b"]
    assert world.effect_tags() == (["a", "b"] if write else [])


@pytest.mark.parametrize("write", [False, True], ids=["no-writes", "with-writes"])
def test_a_step_whose_every_reply_is_lost_keeps_its_one_committed_result(
    world: World, write: bool
) -> None:
    """The step's write committed, and no reply ever came back (DynamoDB: every attempt's reply
    lost; PostgreSQL: the COMMIT's reply lost and the record unreadable: CommitUnknown). The
    holder's step raises; when it calls the step again, the point that did commit is its result:
    its fn does not run again, and the value it gets is the one its effect committed with."""
    holder = world.hold()
    if world.backend == "dynamodb":
        world.faults.lose = 100
        with pytest.raises(ClientError):
            world.step(holder, "charge", "a", write=write)
    else:
        world.faults.lose, world.faults.unreadable_after_lose = 1, 100
        with pytest.raises(CommitUnknown):
            world.step(holder, "charge", "a", write=write)
    world.faults.clear()
    assert world.record().steps[1].result == {"tag": "a", "fence": holder.fence}
    assert world.effect_tags() == (["a"] if write else [])
    assert world.step(holder, "charge", "again", write=write)["tag"] == "a"
    assert [tag for _f, tag in world.ran] == ["a"], "the committed step ran again"
    assert world.effect_tags() == (["a"] if write else [])


def test_a_point_other_than_the_one_at_its_position_is_not_reported_written(
    world: World,
) -> None:
    """The store's own check, beneath the runner: the holder's point at a position is written;
    a second one there, of the same holder and step but with another result (an earlier
    attempt's reply never came, and this one ran the step again), is refused, never taken for
    the first's reply, or the holder would go on with a result that never committed."""
    holder = world.hold()
    lock = holder.store_lock
    first = StepPoint(1, "charge", codec.dumps("first"), lock.fence, 1)
    assert world.store.record_step(lock, first, ()).ok
    assert world.store.record_step(lock, first, ()).ok  # its own reply, recognised
    other = StepPoint(1, "charge", codec.dumps("second"), lock.fence, 2)
    assert not world.store.record_step(lock, other, ()).ok
    assert world.record().steps[1].result == "first"


# -- DynamoDB: throttles -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("write", "fault"),
    [(False, "throttle"), (True, "throttle"), (True, "cancel")],
    ids=["update-throttled", "transaction-throttled", "transaction-cancelled-by-throttle"],
)
@pytest.mark.parametrize("backend", ["dynamodb"])
def test_a_throttled_step_commits_nothing_and_runs_once_more(
    world: World, write: bool, fault: str
) -> None:
    holder = world.hold()
    setattr(world.faults, fault, 1000)  # every attempt, past botocore's and the write's retries
    with pytest.raises(ClientError) as raised:
        world.step(holder, "charge", "a", write=write)
    code = raised.value.response["Error"]["Code"]
    expected = (
        "TransactionCanceledException"
        if fault == "cancel"
        else "ProvisionedThroughputExceededException"
    )
    assert code == expected
    assert len(world.faults.hits) > 2  # botocore's retries, then the write's own
    world.faults.clear()
    assert world.record().steps == {}
    assert world.effect_tags() == []
    world.clock.advance(LEASE_S + 1)  # the holder gave up; the next one runs the step
    successor = world.hold()
    assert world.step(successor, "charge", "b", write=write)["tag"] == "b"
    assert [tag for _f, tag in world.ran] == ["a", "b"]
    assert world.effect_tags() == (["b"] if write else [])
    assert world.record().steps[1].fence == successor.fence


# -- PostgreSQL: the COMMIT --------------------------------------------------------------


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize("then", ["same-holder", "next-holder"])
def test_a_connection_dropped_before_the_step_commits(world: World, then: str) -> None:
    holder = world.hold()
    world.faults.fail = 1
    with pytest.raises(CommitFailed):
        world.step(holder, "charge", "a")
    assert world.faults.hits == ["fail step"]
    assert world.record().steps == {}
    assert world.effect_tags() == [], "the step's writes committed without its point"
    runner = holder
    if then == "next-holder":
        world.clock.advance(LEASE_S + 1)
        runner = world.hold()
    assert world.step(runner, "charge", "b")["tag"] == "b"
    assert [tag for _f, tag in world.ran] == ["a", "b"]
    assert world.effect_tags() == ["b"]
    assert world.record().steps[1].fence == runner.fence


# -- the lease and the TTL ---------------------------------------------------------------


def test_a_takeover_mid_step_refuses_the_zombie_and_its_writes(world: World) -> None:
    holder = world.hold()
    successor: list[OnceLock] = []

    def slow(step: Step) -> str:
        world.ran.append((step.fence, "zombie"))
        world.effects.write(step, holder, "zombie")
        world.clock.advance(LEASE_S + 1)  # frozen past its lease; the key is taken over
        successor.append(world.hold())
        return "zombie"

    with pytest.raises(LeaseLost):
        holder.step("charge", slow)
    assert world.effect_tags() == []
    assert world.record().steps == {}
    assert world.step(successor[0], "charge", "b")["tag"] == "b"
    assert world.effect_tags() == ["b"]


def test_the_lease_passing_mid_step_with_no_takeover_leaves_the_holder_its_step(
    world: World,
) -> None:
    holder = world.hold()

    def slow(step: Step) -> str:
        world.effects.write(step, holder, "late")
        world.clock.advance(LEASE_S + 1)  # late, but nobody took the key
        return "late"

    assert holder.step("charge", slow) == "late"
    assert world.effect_tags() == ["late"]
    world.clock.advance(1)
    successor = world.hold()
    assert successor.step("charge", lambda s: "never") == "late"


def test_a_new_generation_starts_with_no_steps_and_new_step_keys(world: World) -> None:
    keys: list[str] = []

    def charge(tag: str) -> Callable[[Step], str]:
        def fn(step: Step) -> str:
            keys.append(step.idempotency_key)
            world.effects.write(step, holder, tag)
            return tag

        return fn

    holder = world.hold()
    first_generation = steps_of(holder).generation if holder.step("charge", charge("g1")) else 0
    world.step(holder, "ship", "g1-ship")
    world.clock.advance(TTL_S + LEASE_S + 61)  # the holder died; its record's TTL passed
    holder = world.hold()
    assert holder.step("charge", charge("g2")) == "g2"
    second_generation = steps_of(holder).generation
    assert second_generation > first_generation
    assert keys[0] != keys[1]
    record = world.record()
    assert sorted(record.steps) == [1]
    assert record.steps[1].result == "g2"
    assert world.effect_tags() == ["g1", "g1-ship", "g2"]
    generations = {(g, p) for g, p, _f, _t in world.effects.rows(world.scope, "k")}
    assert generations == {(first_generation, 1), (first_generation, 2), (second_generation, 1)}


def test_a_fork_childs_inherited_lock_records_no_step(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = world.hold()
    world.step(holder, "charge", "parent")
    with monkeypatch.context() as child:  # the same objects, in a cloned process
        child.setattr(lifecycle, "_instance", "a-fork-child")
        with pytest.raises(LockInherited):
            world.step(holder, "ship", "child")
    assert [tag for _f, tag in world.ran] == ["parent"]
    assert world.effect_tags() == ["parent"]
    assert sorted(world.record().steps) == [1]
    assert world.step(holder, "ship", "parent-ship")["tag"] == "parent-ship"


# -- hostile input -------------------------------------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = {
    "lone-surrogate": {"note": "\ud83d", "\udfff": ["\ud800x"]},
    "deep-but-storable": _nested(90),
    "huge-int": 7**20_000,
    "look-alike-tags": {"__eo_set__": [1, 2], "other": {"__eo_int__": "0x10"}},
    "one-key-look-alike": {"__eo_tuple__": [1, 2]},
    "nested-look-alike": [{"__eo_dict__": {"__eo_bytes__": "AA=="}}],
    "types": {1: (b"\x00\xff", frozenset({1}), {2.5})},
    "nul-and-escapes": {"a\x00b": "\x00\\u0000\u2028", "k": ["\\", '"']},
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_result_round_trips_to_the_next_holder(world: World, name: str) -> None:
    value = HOSTILE[name]
    holder = world.hold()
    assert holder.step("charge", lambda s: value) == value
    world.clock.advance(LEASE_S + 1)
    successor = world.hold()
    assert successor.step("charge", lambda s: "ran again") == value


@pytest.mark.parametrize(
    "value",
    [_nested(500), object(), {"self": []}],
    ids=["too-deep", "not-encodable", "cycle"],
)
def test_an_unstorable_result_writes_nothing(world: World, value: Any) -> None:
    if isinstance(value, dict):
        value["self"].append(value)
    holder = world.hold()

    def fn(step: Step) -> Any:
        world.effects.write(step, holder, "unstorable")
        return value

    with pytest.raises(StepResultUnstorable):
        holder.step("charge", fn)
    assert world.record().steps == {}
    assert world.effect_tags() == []


def test_a_result_over_the_cap_writes_nothing(world: World) -> None:
    holder = world.hold()
    big = "x" * (world.store.result_cap_bytes + 1)

    def fn(step: Step) -> str:
        world.effects.write(step, holder, "big")
        return big

    with pytest.raises(StepResultUnstorable):
        holder.step("charge", fn)
    assert world.record().steps == {}
    assert world.effect_tags() == []
    assert world.step(holder, "charge", "small")["tag"] == "small"  # the holder may go on
    assert world.effect_tags() == ["small"]


@pytest.mark.parametrize("name", ["\ud83d", "a\udfffb", "", "x" * 257, "a\x00b", "\x00"])
def test_a_step_name_that_cannot_be_stored_is_refused_before_it_runs(
    world: World, name: str
) -> None:
    holder = world.hold()
    with pytest.raises(ValueError, match="step name"):
        world.step(holder, name, "never")
    assert world.ran == []
    assert world.record().steps == {}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_lost_reply_of_a_hostile_result_is_recognised_as_ours(world: World, name: str) -> None:
    """Recognising its own point compares the stored result's text with the sent one: that
    holds for text the codec escaped (a lone surrogate) and for tag look-alikes too."""
    value = HOSTILE[name]
    holder = world.hold()
    world.faults.lose = 1
    assert holder.step("charge", lambda s: value) == value
    assert [hit.split()[0] for hit in world.faults.hits] == ["lose"]
    assert world.record().steps[1].result == value


@pytest.mark.parametrize("backend", ["dynamodb"])
@pytest.mark.parametrize("write", [False, True], ids=["update", "transaction"])
def test_a_step_that_would_outgrow_the_item_is_unstorable_and_writes_nothing(
    world: World, write: bool
) -> None:
    """Each result is under the cap, but DynamoDB's 400 KB item cannot hold them all: the step
    that would outgrow it is refused as StepResultUnstorable (UpdateItem's ValidationException,
    or the transaction's cancellation for it), and none of its writes happen."""
    holder = world.hold()
    chunk = "x" * (60 * 1024)

    def step(position: int) -> Callable[[Step], str]:
        def fn(step: Step) -> str:
            if write:
                world.effects.write(step, holder, f"s{position}")
            return chunk

        return fn

    position = 1
    while len(world.record().steps) == position - 1 and position < 9:
        try:
            holder.step(f"s{position}", step(position))
        except StepResultUnstorable:
            break
        position += 1
    assert 5 <= position <= 7, "every step fitted: none was refused"
    assert sorted(world.record().steps) == list(range(1, position))
    assert len(world.effect_tags()) == (position - 1 if write else 0)


@pytest.mark.parametrize("name", ["step\u2028ünï 🚀", "a" * 256, "__eo_set__", '"\\'])
def test_an_odd_step_name_is_kept_and_resumed(world: World, name: str) -> None:
    """Valid text up to 256 characters names a step on both stores: the next holder resumes
    it by name."""
    holder = world.hold()
    assert world.step(holder, name, "first")["tag"] == "first"
    world.clock.advance(LEASE_S + 1)
    successor = world.hold()
    assert world.step(successor, name, "again")["tag"] == "first"
    assert world.record().steps[1].name == name
    assert world.effect_tags() == ["first"]


NUL_KEY = "order\x00one"  # PostgreSQL keeps such a key as its hash (stores/postgres/keys)


def hold_key(world: World, key: str) -> OnceLock:
    claim = begin(world.scope, key, store=world.store, lease_s=LEASE_S)
    assert claim.lock is not None, claim
    return claim.lock


def kept_point(world: World, key: str) -> StepPoint:
    record = world.store.get(world.scope, key)
    assert record is not None
    return record.steps[INPUT]


def test_a_nul_keys_input_kept_with_a_lost_reply_keeps_the_key_beside_it(world: World) -> None:
    """Point 0 of a key with a NUL holds the key beside the input on PostgreSQL (`input+key`),
    written like every point: a lost reply is recognised as ours, and the next holder, and the
    completer, get the input and the key its first holder had, not its hash."""
    holder = hold_key(world, NUL_KEY)
    world.faults.lose = 1
    assert steps_of(holder).keep_input({"order": 1}) == {"order": 1}
    point = kept_point(world, NUL_KEY)
    if world.backend == "dynamodb":  # DynamoDB keeps the key itself: no need to keep it again
        assert (point.name, input_of(point)) == ("input", (None, {"order": 1}))
    else:
        assert (point.name, input_of(point)) == (KEYED_INPUT, (NUL_KEY, {"order": 1}))
    world.clock.advance(LEASE_S + 1)
    successor = hold_key(world, NUL_KEY)
    assert steps_of(successor).stored_input() == (True, {"order": 1})
    assert steps_of(successor).keep_input({"order": 2}) == {"order": 1}


def test_a_kept_input_whose_replies_were_lost_is_kept_once(world: World) -> None:
    """The input a resumable keeps (position 0) is written like a step: a lost reply is
    recognised; after every reply was lost its holder reads the input back instead of keeping
    another; the next holder gets it."""
    holder = world.hold()
    world.faults.lose = 1
    assert steps_of(holder).keep_input({"order": 1}) == {"order": 1}
    assert world.record().steps[0].result == {"order": 1}
    world.clock.advance(LEASE_S + 1)
    second = world.hold()
    world.step(second, "charge", "a")  # read the record: no input kept by this one
    world.clock.advance(LEASE_S + 1)
    third = world.hold()
    world.step(third, "charge", "x")  # resumed; it reads the record, input included
    assert steps_of(third).stored_input() == (True, {"order": 1})


@pytest.mark.parametrize("key", ["k", NUL_KEY], ids=["plain-key", "nul-key"])
def test_an_input_kept_with_every_reply_lost_is_read_back(world: World, key: str) -> None:
    """Read back with the key kept beside it where the store keeps another form of the key
    (a NUL on PostgreSQL: `input+key`)."""
    holder = hold_key(world, key)
    world.step(holder, "charge", "a", write=False)  # the holder has read its record
    if world.backend == "dynamodb":
        world.faults.lose = 100
        error: type[Exception] = ClientError
    else:
        world.faults.lose, world.faults.unreadable_after_lose = 1, 100
        error = CommitUnknown
    with pytest.raises(error):
        steps_of(holder).keep_input({"order": 1})
    world.faults.clear()
    assert steps_of(holder).keep_input({"order": 2}) == {"order": 1}
    kept_key = key if world.backend == "postgres" and "\x00" in key else None
    assert input_of(kept_point(world, key)) == (kept_key, {"order": 1})
