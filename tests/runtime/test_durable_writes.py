"""A durable execution's business writes on PostgreSQL, across a suspension and its replay.

A step that wrote through the durable lock's transaction lost its write: the `context.wait`
after it suspended the invocation, the suspension rolled the transaction back, the replay took
the step's checkpointed result without running it again, and the completion committed COMPLETED
with no write. No transaction that commits with the key's completion can hold a checkpointed
step's writes (a crash between the SDK's checkpoint and our COMMIT loses them as well), so a
durable lock refuses its transaction, and the step puts its writes in a `once` of its own,
whose transaction commits with that inner key's completion, inside the step.

Run by the durable SDK's own local runner, on a real PostgreSQL server.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from aws_durable_execution_sdk_python import (
    DurableContext,
    StepContext,
    durable_execution,
    durable_step,
)
from aws_durable_execution_sdk_python.config import Duration, StepConfig
from aws_durable_execution_sdk_python.exceptions import SuspendExecution
from aws_durable_execution_sdk_python.retries import RetryPresets
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

from exactly_once import Claim, ClaimStatus, ConfigurationError, once
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock
from tests.stores.pg_support import business_table
from tests.stores.pg_support import table_rows as rows

LEASE_S = 3600.0
NO_RETRY = StepConfig(retry_strategy=RetryPresets.none())  # a refused step fails at once


@pytest.fixture
def pg_store(pg_dsn: str, clock: FakeClock) -> PostgresStore:
    return PostgresStore(pg_dsn, clock=clock)


@pytest.fixture
def payments(pg_dsn: str) -> str:
    """A business table of the test's own."""
    return business_table(pg_dsn, "order_id text PRIMARY KEY, amount int")


def run_execution(handler: Any, payload: dict[str, Any]) -> Any:
    runner = DurableFunctionTestRunner(handler=handler)
    return runner.run(input=json.dumps(payload), execution_timeout=60)


def test_a_durable_lock_refuses_its_transaction_so_no_step_write_is_lost(
    pg_store: PostgresStore, pg_dsn: str, payments: str, scope: str
) -> None:
    """Before the refusal the record ended COMPLETED and the payments table empty."""
    holder: list[Claim] = []
    refusals: list[str] = []

    @durable_step
    def pay(_: StepContext, order: str) -> str:
        try:
            conn = holder[-1].lock.transaction
        except ConfigurationError as refused:
            refusals.append(str(refused))
            raise
        conn.execute(f"INSERT INTO {payments} VALUES (%s, 42)", (order,))  # noqa: S608
        return f"paid {order}"

    @durable_execution
    def handler(event: dict[str, Any], context: DurableContext) -> Any:
        with once(
            scope, event["key"], lambda_context=context, lease_s=LEASE_S, store=pg_store
        ) as claim:
            holder.append(claim)
            if not claim.acquired:
                return {"status": str(claim.status)}
            receipt = context.step(pay(event["key"]), config=NO_RETRY)
            context.wait(Duration.from_seconds(1))  # suspends: the transaction rolls back
            claim.lock.succeed({"receipt": receipt})
        return {"receipt": receipt}

    run_execution(handler, {"key": "order-1"})

    record = pg_store.get(scope, "order-1")
    assert record is not None
    written = rows(pg_dsn, payments)
    # The loss: the key says done, and the write is gone.
    assert not (record.status is Status.COMPLETED and written == []), "the step's write was lost"
    assert refusals, "the durable lock lent its transaction"
    assert "lock.step(" in refusals[0]  # the message says the way out
    assert record.status is Status.FAILED  # the step's error failed the key: it can run again
    assert written == []


def test_a_step_keeps_its_writes_in_a_once_of_its_own_across_suspension_and_replay(
    pg_store: PostgresStore, pg_dsn: str, payments: str, scope: str
) -> None:
    """The documented pattern: the step's writes commit with an inner key's completion before
    the step's result is checkpointed; the replay skips the step and finds them there."""
    steps_run: list[str] = []
    outer_claims: list[tuple[ClaimStatus, bool]] = []

    @durable_step
    def pay(_: StepContext, order: str) -> str:
        steps_run.append(order)
        with once(scope, f"{order}#pay", lease_s=60, store=pg_store) as inner:
            if not inner.acquired:  # a retried step whose writes committed: same answer
                return str(inner.result)
            inner.lock.transaction.execute(
                f"INSERT INTO {payments} VALUES (%s, 42)",  # noqa: S608
                (order,),
            )
            inner.lock.succeed(f"paid {order}")
        return f"paid {order}"

    @durable_execution
    def handler(event: dict[str, Any], context: DurableContext) -> Any:
        with once(
            scope, event["key"], lambda_context=context, lease_s=LEASE_S, store=pg_store
        ) as claim:
            outer_claims.append((claim.status, claim.resumed))
            if not claim.acquired:
                return {"status": str(claim.status), "result": claim.result}
            receipt = context.step(pay(event["key"]), config=NO_RETRY)
            context.wait(Duration.from_seconds(1))  # suspends inside the outer block
            claim.lock.succeed({"receipt": receipt})
        return {"receipt": receipt}

    result = run_execution(handler, {"key": "order-1"})

    assert json.loads(result.result) == {"receipt": "paid order-1"}
    assert outer_claims == [(ClaimStatus.ACQUIRED, False), (ClaimStatus.ACQUIRED, True)]
    assert steps_run == ["order-1"]  # the replay took the checkpoint
    assert rows(pg_dsn, payments) == [("order-1", 42)]  # committed with the inner key
    inner = pg_store.get(scope, "order-1#pay")
    outer = pg_store.get(scope, "order-1")
    assert inner is not None
    assert outer is not None
    assert (inner.status, inner.result) == (Status.COMPLETED, "paid order-1")
    assert (outer.status, outer.result) == (Status.COMPLETED, {"receipt": "paid order-1"})


def test_a_suspension_with_uncommitted_writes_fails_the_key_instead_of_losing_them(
    pg_store: PostgresStore, pg_dsn: str, payments: str, scope: str, caplog: Any
) -> None:
    """Defence in depth: a block that spans a suspension with writes in its transaction (here a
    plain `once`, not the durable one, around a wait) must not let them vanish quietly: they
    roll back with the invocation, so the key is made FAILED for a person, and an error logged,
    where before it stayed IN_PROGRESS for a later holder to find the work half done."""
    durable = SimpleNamespace(
        execution_context=SimpleNamespace(durable_execution_arn="arn:durable/e1"),
        lambda_context=None,
    )

    def invocation() -> None:
        with (
            once(scope, "outer", lambda_context=durable, lease_s=LEASE_S, store=pg_store) as o,
            once(scope, "inner", lease_s=60, store=pg_store) as inner,
        ):
            assert (o.acquired, inner.acquired) == (True, True)
            inner.lock.transaction.execute(f"INSERT INTO {payments} VALUES ('order-1', 42)")  # noqa: S608
            raise SuspendExecution("waiting")  # a wait inside both blocks

    with pytest.raises(SuspendExecution):
        invocation()

    assert rows(pg_dsn, payments) == []  # the invocation's writes are gone...
    record = pg_store.get(scope, "inner")
    assert record is not None
    assert record.status is Status.FAILED  # ...and the key says so
    assert record.error is not None
    assert not record.error.retryable
    assert "suspended" in record.error.message
    assert any("suspended" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    outer = pg_store.get(scope, "outer")
    assert outer is not None
    assert outer.status is Status.IN_PROGRESS  # the durable block itself stays resumable


def test_a_suspension_with_a_read_only_transaction_keeps_the_key_resumable(
    pg_store: PostgresStore, payments: str, scope: str
) -> None:
    """Nothing was written, so nothing can be lost: the suspension leaves the key as it is."""

    def invocation() -> None:
        with once(scope, "inner", lease_s=60, store=pg_store) as inner:
            inner.lock.transaction.execute(f"SELECT count(*) FROM {payments}")  # noqa: S608
            raise SuspendExecution("waiting")

    with pytest.raises(SuspendExecution):
        invocation()
    record = pg_store.get(scope, "inner")
    assert record is not None
    assert (record.status, record.error) == (Status.IN_PROGRESS, None)
