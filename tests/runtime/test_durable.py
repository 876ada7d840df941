"""Lambda durable functions, run by the durable SDK's own local runner (checkpoint and replay).

A `once` block that spans a durable wait is suspended inside the block: the invocation ends with
the SDK's SuspendExecution, and the runner invokes the handler again from the start, replaying
the checkpointed step. The replay must resume its own lock (not meet it "in progress", which is
Powertools' issue #7762), the checkpointed step must not run again, and another execution with
the same key must still be kept out. On both stores.
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
from aws_durable_execution_sdk_python.config import Duration
from aws_durable_execution_sdk_python.exceptions import SuspendExecution
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

from exactly_once import ClaimStatus, ConfigurationError, begin, once
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status

LEASE_S = 3600.0  # covers the execution, waits included (required with a durable context)


def run_execution(handler: Any, payload: dict[str, Any]) -> Any:
    runner = DurableFunctionTestRunner(handler=handler)
    return runner.run(input=json.dumps(payload), execution_timeout=60)


def test_a_replay_resumes_its_own_lock_and_the_checkpointed_step_runs_once(
    store: Store, scope: str
) -> None:
    charged: list[str] = []
    claims: list[tuple[ClaimStatus, bool, int]] = []
    intruders: list[ClaimStatus] = []

    @durable_step
    def charge(_: StepContext, key: str) -> str:
        charged.append(key)
        return f"charged {key}"

    @durable_execution
    def handler(event: dict[str, Any], context: DurableContext) -> Any:
        with once(scope, event["key"], lambda_context=context, lease_s=LEASE_S, store=store) as c:
            claims.append((c.status, c.resumed, c.lock.fence if c.acquired else 0))
            if not c.acquired:
                return {"status": str(c.status), "result": c.result}
            receipt = context.step(charge(event["key"]))
            # Another execution with the same key, while this one holds it: kept out.
            other = begin(scope, event["key"], lease_s=LEASE_S, store=store, resume_id="e2")
            intruders.append(other.status)
            context.wait(Duration.from_seconds(1))  # suspends the invocation inside the block
            c.lock.succeed({"receipt": receipt})
        return {"receipt": receipt}

    result = run_execution(handler, {"key": "order-1"})

    assert json.loads(result.result) == {"receipt": "charged order-1"}
    assert charged == ["order-1"]  # the step ran once; the replay used its checkpoint
    assert [(status, resumed) for status, resumed, _ in claims] == [
        (ClaimStatus.ACQUIRED, False),
        (ClaimStatus.ACQUIRED, True),  # the replay resumed its own lock...
    ]
    assert claims[1][2] > claims[0][2]  # ...with a new fence: the first invocation is fenced out
    assert intruders == [ClaimStatus.IN_PROGRESS, ClaimStatus.IN_PROGRESS]
    record = store.get(scope, "order-1")
    assert record is not None
    assert (record.status, record.result) == (Status.COMPLETED, {"receipt": "charged order-1"})

    # A second execution for the same key finds it done and replays the stored result.
    again = run_execution(handler, {"key": "order-1"})
    assert json.loads(again.result)["result"] == {"receipt": "charged order-1"}
    assert charged == ["order-1"]


def test_a_suspension_leaves_the_lock_in_progress_for_the_replay(store: Store, scope: str) -> None:
    durable = SimpleNamespace(
        execution_context=SimpleNamespace(durable_execution_arn="arn:durable/e1"),
        lambda_context=None,
    )

    def body() -> None:
        with once(scope, "k", lambda_context=durable, lease_s=LEASE_S, store=store) as claim:
            assert claim.acquired
            raise SuspendExecution("waiting")

    with pytest.raises(SuspendExecution):
        body()
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.error, record.resume_id) == (
        Status.IN_PROGRESS,
        None,
        "arn:durable/e1",
    )


def test_a_durable_lock_without_a_lease_for_the_whole_execution_is_refused(
    store: Store, scope: str
) -> None:
    durable = SimpleNamespace(
        execution_context=SimpleNamespace(durable_execution_arn="arn:durable/e1"),
        lambda_context=None,
    )
    with pytest.raises(ConfigurationError, match="lease_s"):
        begin(scope, "k", lambda_context=durable, store=store)
    assert store.get(scope, "k") is None
