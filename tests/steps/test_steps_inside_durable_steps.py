"""`lock.step` inside the durable SDK's own `context.step`, across a replay (review, issue 29).

The SDK's documentation tells a durable function to put every side effect in a `context.step`,
so wrapping a `lock.step` in one is the natural way to get both: the SDK's checkpoint and
retries, and the recovery point that makes the effect once across executions. A replay answers
a checkpointed SDK step from its log without calling the function inside it, so the replay's
first `lock.step` that does run is `ship`, at the holder's first position, where the record's
recovery point is `charge`. A durable lock passes over finished points to its own
(steps/runner.py `_replayed`); before that it was a StepOrderError, though the steps had not
changed, and the execution failed after its first wait, every time.

Beside it, the composition the example uses, on both stores: `lock.step` called directly, its
writes (`step.transaction`, `step.put`) committed once across the replays.

Run by the SDK's local runner, on both stores.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration, StepConfig
from aws_durable_execution_sdk_python.lambda_service import InvocationStatus
from aws_durable_execution_sdk_python.retries import RetryPresets
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

from exactly_once import once
from exactly_once.steps.step import Step
from exactly_once.stores.protocol import Store
from tests.stores.pg_support import business_table, table_rows

LEASE_S = 3600.0
NO_RETRY = StepConfig(retry_strategy=RetryPresets.none())


def record(ran: list[str], name: str, result: str) -> str:
    ran.append(name)
    return result


def test_lock_steps_wrapped_in_sdk_steps_survive_a_replay(store: Store, scope: str) -> None:
    ran: list[str] = []

    @durable_execution
    def handler(event: dict[str, Any], context: DurableContext) -> Any:
        with once(scope, event["key"], lambda_context=context, lease_s=LEASE_S, store=store) as c:
            if not c.acquired:
                return {"status": str(c.status)}
            lock = c.lock
            charged = context.step(
                lambda _: lock.step("charge", lambda s: record(ran, "charge", "ch_1")),
                name="charge",
                config=NO_RETRY,
            )
            context.wait(Duration.from_seconds(1))  # suspends; the replay skips "charge"
            shipped = context.step(
                lambda _: lock.step("ship", lambda s: record(ran, "ship", "sh_1")),
                name="ship",
                config=NO_RETRY,
            )
            c.lock.succeed([charged, shipped])
        return [charged, shipped]

    with DurableFunctionTestRunner(handler=handler) as runner:
        result = runner.run(input=json.dumps({"key": "order-1"}), execution_timeout=60)

    assert result.status is InvocationStatus.SUCCEEDED, result.error  # today: StepOrderError
    assert json.loads(result.result or "null") == ["ch_1", "sh_1"]
    assert ran == ["charge", "ship"]


class StepWrites:
    """A step's write that commits with its recovery point: a PostgreSQL row in
    `step.transaction`, a DynamoDB item carried by the step (`step.put`). Neither has a unique
    key per step, so a second commit of one step would show as a second row."""

    def __init__(self, backend: str, request: pytest.FixtureRequest) -> None:
        self.backend = backend
        if backend == "postgres":
            self.dsn: str = request.getfixturevalue("pg_dsn")
            self.table = business_table(self.dsn, "order_id text, step text")
        else:
            self.ddb = request.getfixturevalue("ddb")
            self.table = request.getfixturevalue("ledger_table")

    def write(self, step: Step, order_id: str) -> None:
        if self.backend == "postgres":
            step.transaction.execute(
                f"INSERT INTO {self.table} VALUES (%s, %s)",  # noqa: S608
                (order_id, step.name),
            )
        else:
            item = {"pk": {"S": order_id}, "sk": {"S": f"{step.name}#{uuid.uuid4().hex}"}}
            step.put(self.table, item, new_only=("pk", "sk"))

    def rows(self, order_id: str) -> list[str]:
        """The steps whose write committed, one entry per commit, sorted."""
        if self.backend == "postgres":
            return sorted(step for key, step in table_rows(self.dsn, self.table) if key == order_id)
        items = self.ddb.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": order_id}},
            ConsistentRead=True,
        )["Items"]
        return sorted(item["sk"]["S"].split("#")[0] for item in items)


def test_a_steps_writes_in_a_durable_execution_commit_once_across_the_replays(
    store: Store, scope: str, backend: str, request: pytest.FixtureRequest
) -> None:
    """`lock.step` called directly in a durable handler (as examples/durable_orders does): each
    step's write commits with its recovery point before the wait suspends the invocation, and
    the replays get the step back without writing again."""
    writes = StepWrites(backend, request)
    ran: list[str] = []
    invocations: list[int] = []

    @durable_execution
    def handler(event: dict[str, Any], context: DurableContext) -> Any:
        invocations.append(1)
        with once(scope, event["key"], lambda_context=context, lease_s=LEASE_S, store=store) as c:
            if not c.acquired:
                return {"status": str(c.status)}
            lock = c.lock

            def act(step: Step) -> str:
                ran.append(step.name)
                writes.write(step, event["key"])
                return f"{step.name} done"

            paid = lock.step("pay", act)
            context.wait(Duration.from_seconds(1))
            shipped = lock.step("ship", act)
            context.wait(Duration.from_seconds(1))
            lock.succeed([paid, shipped])
        return [paid, shipped]

    with DurableFunctionTestRunner(handler=handler) as runner:
        result = runner.run(input=json.dumps({"key": "order-1"}), execution_timeout=60)

    assert result.status is InvocationStatus.SUCCEEDED, result.error
    assert json.loads(result.result or "null") == ["pay done", "ship done"]
    assert len(invocations) >= 3  # the first invocation and a replay after each wait
    assert ran == ["pay", "ship"]
    assert writes.rows("order-1") == ["pay", "ship"]
