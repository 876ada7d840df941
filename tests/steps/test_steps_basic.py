"""A holder's steps: each runs once per key, a takeover resumes after the last finished one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import begin
from exactly_once.effects import LeaseLost
from exactly_once.errors import StepOrderError
from exactly_once.steps.step import Step
from exactly_once.stores.protocol import Store
from tests.conftest import FakeClock

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def test_a_takeover_resumes_after_the_last_finished_step(
    store: Store, scope: str, clock: FakeClock
) -> None:
    ran: list[str] = []

    def runs(name: str, result: Any) -> Callable[[Step], Any]:
        def fn(step: Step) -> Any:
            ran.append(name)
            return result

        return fn

    first = begin(scope, "k", store=store, lease_s=10).lock
    assert first.step("charge", runs("charge", "ch_1")) == "ch_1"
    assert first.step("ship", runs("ship", {"id": 7})) == {"id": 7}
    clock.advance(30)  # the first holder died after two steps; its lease ends
    second = begin(scope, "k", store=store, lease_s=10).lock
    assert second.fence > first.fence
    assert second.step("charge", runs("charge!", "x")) == "ch_1"
    assert second.step("ship", runs("ship!", "x")) == {"id": 7}
    assert second.step("email", runs("email", True)) is True
    second.succeed("done")
    assert ran == ["charge", "ship", "email"]


def test_a_zombie_step_after_a_takeover_is_refused(
    store: Store, scope: str, clock: FakeClock
) -> None:
    zombie = begin(scope, "k", store=store, lease_s=10).lock
    zombie.step("charge", lambda s: 1)
    clock.advance(30)
    successor = begin(scope, "k", store=store, lease_s=10).lock
    with pytest.raises(LeaseLost):
        zombie.step("ship", lambda s: 2)
    assert successor.step("charge", lambda s: 99) == 1
    assert successor.step("ship", lambda s: 3) == 3


def test_steps_keep_their_order(store: Store, scope: str, clock: FakeClock) -> None:
    first = begin(scope, "k", store=store, lease_s=10).lock
    first.step("a", lambda s: 1)
    with pytest.raises(StepOrderError):
        first.step("a", lambda s: 1)
    clock.advance(30)
    second = begin(scope, "k", store=store, lease_s=10).lock
    with pytest.raises(StepOrderError):
        second.step("b", lambda s: 2)


def test_the_step_key_is_the_same_for_every_holder_of_a_generation(
    store: Store, scope: str, clock: FakeClock
) -> None:
    keys: list[str] = []

    def crash(step: object) -> None:
        keys.append(step.idempotency_key)  # type: ignore[attr-defined]
        raise RuntimeError("died after the provider's call")

    first = begin(scope, "k", store=store, lease_s=10).lock
    with pytest.raises(RuntimeError):
        first.step("charge", crash)
    clock.advance(30)
    second = begin(scope, "k", store=store, lease_s=10).lock
    second.step("charge", lambda s: keys.append(s.idempotency_key))
    assert keys[0] == keys[1]
    assert keys[0].startswith("eo-step-")


def test_steps_do_not_nest(store: Store, scope: str) -> None:
    lock = begin(scope, "k", store=store, lease_s=10).lock
    with pytest.raises(StepOrderError, match="do not nest"):
        lock.step("outer", lambda s: lock.step("inner", lambda t: 1))
    # Nothing was recorded: the next holder (here, this one) runs the outer step afresh.
    assert lock.step("outer", lambda s: 2) == 2


def test_inside_a_step_ctx_transaction_is_the_steps_own(pg_dsn: str, scope: str) -> None:
    """Writes made through ctx.transaction inside a step (as the ledger's helpers make them)
    commit with the step's recovery point, not with the key's completion: a holder that dies
    after the step keeps them, and its successor does not make them again."""
    import psycopg

    from exactly_once.stores.postgres.store import PostgresStore

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS step_rows (k text, step text)")
    store = PostgresStore(pg_dsn)
    lock = begin(scope, "k", store=store, lease_s=10).lock

    def write(step: object) -> str:
        lock.transaction.execute("INSERT INTO step_rows VALUES (%s, 'charge')", (scope,))
        return "ch"

    assert lock.step("charge", write) == "ch"
    lock.abandon()  # the holder dies: nothing of its own transaction commits
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT count(*) FROM step_rows WHERE k = %s", (scope,)).fetchone()
    assert rows == (1,)


def test_a_step_may_be_named_input_beside_a_kept_input(store: Store, scope: str) -> None:
    from exactly_once.steps.runner import steps_of

    lock = begin(scope, "k", store=store, lease_s=10).lock
    steps_of(lock).keep_input({"order": 1})
    assert lock.step("input", lambda s: "parsed") == "parsed"


def test_a_refused_step_write_is_not_tried_again(store: Store, scope: str) -> None:
    """A permanent refusal fares no better on a second try: one call, then the error."""
    from exactly_once.errors import StepWriteRefused

    calls: list[int] = []
    real = store.record_step

    def refusing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        raise StepWriteRefused("refused", 0)

    lock = begin(scope, "k", store=store, lease_s=10).lock
    store.record_step = refusing  # type: ignore[method-assign]
    try:
        with pytest.raises(StepWriteRefused):
            lock.step("charge", lambda s: 1)
    finally:
        store.record_step = real  # type: ignore[method-assign]
    assert calls == [1]


def test_the_hundredth_dynamodb_write_of_a_step_is_refused_at_once(
    ddb: DynamoDBClient, idempotency_table: str, scope: str
) -> None:
    from exactly_once.errors import PermanentError, StepWriteRefused
    from exactly_once.stores.dynamodb.store import IdempotencyStore

    store = IdempotencyStore(idempotency_table, client=ddb)
    lock = begin(scope, "k", store=store, lease_s=10).lock

    def many(step: Step) -> None:
        for i in range(100):
            step.write({"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": str(i)}}}})

    with pytest.raises(StepWriteRefused) as refused:
        lock.step("many", many)
    assert isinstance(refused.value, PermanentError)
    assert refused.value.index == 99


def test_a_step_after_the_outcome_is_refused_before_it_runs(store: Store, scope: str) -> None:
    ran: list[int] = []
    lock = begin(scope, "k", store=store, lease_s=10).lock
    lock.succeed("done")
    with pytest.raises(RuntimeError, match="already recorded"):
        lock.step("late", lambda s: ran.append(1))
    assert ran == []
