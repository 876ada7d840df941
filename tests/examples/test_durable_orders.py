"""examples/durable_orders: an SQS dispatcher that starts one durable execution per order under a
deterministic name, and a durable workflow whose three steps each act once per order.

The workflow runs in the durable SDK's own local runner (aws-durable-execution-sdk-python-
testing: real checkpoints, real suspensions at `context.wait`, real replays), on DynamoDB Local
and on a real PostgreSQL server. The dispatcher runs on a real boto3 Lambda client whose Invoke
requests are answered by tests/examples/lambda_front_door.py: AWS's documented name semantics in
front of the same local runner (AWS itself was not reachable here).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from aws_durable_execution_sdk_python.lambda_service import InvocationStatus
from aws_durable_execution_sdk_python_testing.runner import (
    DurableFunctionTestResult,
    DurableFunctionTestRunner,
)

from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status
from examples.durable_orders.dispatcher import Outcome, dispatch
from examples.durable_orders.naming import execution_name, payload
from examples.durable_orders.settings import SCOPE
from examples.durable_orders.workflow import make_handler
from tests.examples.lambda_front_door import FrontDoor
from tests.examples.order_providers import RecordingProviders
from tests.stores.conftest import backend, make_store, store

__all__ = ["backend", "make_store", "store"]

FUNCTION = "order-workflow:live"
WAIT_S = 30  # the local runner skips the time; the suspension and replay are real


def order(**fields: Any) -> dict[str, Any]:
    return {"order_id": f"o-{uuid.uuid4().hex[:12]}", "amount": 42, **fields}


def sqs_event(*bodies: str) -> dict[str, Any]:
    return {
        "Records": [
            {"messageId": f"m-{n}-{uuid.uuid4().hex[:6]}", "body": body, "attributes": {}}
            for n, body in enumerate(bodies)
        ]
    }


class Workflow:
    """The example's durable handler over recording providers, in a local runner, counting the
    handler's invocations (the first one and each replay)."""

    def __init__(self, store: Store) -> None:
        self.providers = RecordingProviders()
        self.invocations = 0
        inner = make_handler(self.providers, store=store, wait_s=WAIT_S)

        def counted(event: Any, context: Any) -> Any:
            self.invocations += 1
            return inner(event, context)

        self.runner = DurableFunctionTestRunner(handler=counted)

    def start(self, name: str | None, body: bytes) -> str:
        return self.runner.run_async(
            input=body.decode(), execution_timeout=120, execution_name=name or "unnamed"
        )

    def run(self, the_order: dict[str, Any]) -> DurableFunctionTestResult:
        """One execution of the order, as an event source mapping starts one: no name."""
        return self.runner.wait_for_result(self.start(None, payload(the_order)), timeout=120)

    def wait(self, arn: str) -> DurableFunctionTestResult:
        return self.runner.wait_for_result(arn, timeout=120)


@pytest.fixture
def workflow(store: Store) -> Iterator[Workflow]:
    flow = Workflow(store)
    try:
        yield flow
    finally:
        flow.runner.close()  # type: ignore[no-untyped-call]


def answer(result: DurableFunctionTestResult) -> dict[str, Any]:
    assert result.status is InvocationStatus.SUCCEEDED, result.error
    assert result.result is not None
    decoded: dict[str, Any] = json.loads(result.result)
    return decoded


# --- the execution name -------------------------------------------------------------------


def _name_rules() -> tuple[re.Pattern[str], int, int]:
    """DurableExecutionName's pattern and length limits, from the installed service model."""
    model = botocore.session.get_session().get_service_model("lambda")
    invoke = model.operation_model("Invoke").input_shape
    assert invoke is not None
    shape = invoke.members["DurableExecutionName"]
    return re.compile(shape.metadata["pattern"]), shape.metadata["min"], shape.metadata["max"]


KEYS = ["o-1", "a b", "a-b", "a_b", "ünïcödé", "x" * 500, "lone \ud800 surrogate", "../../x", "-"]


def test_an_execution_name_is_allowed_by_the_service_model_and_unique_per_key() -> None:
    pattern, shortest, longest = _name_rules()
    names = [execution_name(SCOPE, key) for key in KEYS]
    for key, name in zip(KEYS, names, strict=True):
        assert pattern.fullmatch(name), (key, name)
        assert shortest <= len(name) <= longest, (key, name)
        assert execution_name(SCOPE, key) == name  # deterministic: every delivery, every process
    assert len(set(names)) == len(KEYS)  # "a b", "a-b" and "a_b" look alike, named apart
    assert execution_name("another-scope", "o-1") != execution_name(SCOPE, "o-1")


def test_the_name_scheme_is_pinned() -> None:
    """A message redelivered across a deploy must get the name its first delivery got: a change
    of scheme would start a second execution for every order in flight."""
    assert execution_name("durable-orders", "o-1") == "o-1-5708abc41155f37fa104bcaf0b44ec3c"
    assert execution_name("durable-orders", "ünïcödé") == "-n-c-d--0e935a15be5bd18cbf810c78656a3fdc"


def test_the_payload_is_the_same_bytes_for_the_same_order_whatever_its_json_spelling() -> None:
    spelled = ['{"order_id": "o-1", "amount": 42}', '{"amount":42,"order_id":"o-1"}']
    sent = {payload(json.loads(body)) for body in spelled}
    assert len(sent) == 1
    assert payload({"order_id": "o-1", "amount": 43}) not in sent


# --- the dispatcher ---------------------------------------------------------------------


def _fake_start(name: str | None, body: bytes) -> str:
    """An execution ARN as Lambda makes them, for the dispatcher tests that run no workflow."""
    return f"arn:aws:lambda:us-east-1:123456789012:durable-execution:order-workflow:{name}:{uuid.uuid4()}"  # noqa: E501


def test_the_dispatcher_invokes_asynchronously_under_the_orders_name() -> None:
    door = FrontDoor(_fake_start)
    the_order = order()
    results, response = dispatch(sqs_event(json.dumps(the_order)), door.client(), FUNCTION)

    assert response == {"batchItemFailures": []}
    [sent] = door.sent
    assert sent.invocation_type == "Event"
    assert sent.execution_name == execution_name(SCOPE, the_order["order_id"])
    assert sent.payload == payload(the_order)
    assert sent.path.endswith(
        "/2015-03-31/functions/order-workflow/invocations?Qualifier=live"
    ) or ("/functions/order-workflow%3Alive/invocations" in sent.path)
    [started] = results
    assert started.outcome is Outcome.STARTED
    assert started.execution_arn == door.started[0]  # read back from the answer's header


def test_a_redelivered_message_starts_no_second_execution() -> None:
    door = FrontDoor(_fake_start)
    body = json.dumps(order())
    first, _ = dispatch(sqs_event(body), door.client(), FUNCTION)
    # The same message again (its visibility timeout passed, or its batch was retried), and
    # the same order sent twice in one batch.
    again, response = dispatch(sqs_event(body, body), door.client(), FUNCTION)

    assert response == {"batchItemFailures": []}
    assert len(door.sent) == 3
    assert len(door.started) == 1
    assert {r.execution_arn for r in first + again} == {door.started[0]}


def test_another_payload_under_the_orders_name_counts_as_started() -> None:
    door = FrontDoor(_fake_start)
    the_order = order()
    dispatch(sqs_event(json.dumps(the_order)), door.client(), FUNCTION)
    changed = json.dumps({**the_order, "amount": 43})
    results, response = dispatch(sqs_event(changed), door.client(), FUNCTION)

    assert response == {"batchItemFailures": []}  # not retried: the answer would not change
    [result] = results
    assert (result.outcome, result.reason) == (
        Outcome.ALREADY_STARTED,
        "DurableExecutionAlreadyStartedException",  # the code botocore parsed off the 409
    )
    assert len(door.started) == 1


def test_a_throttled_invoke_and_a_poison_message_are_left_to_sqs() -> None:
    door = FrontDoor(_fake_start)
    throttled, fine = order(), order()
    door.throttle.add(execution_name(SCOPE, throttled["order_id"]))
    event = sqs_event(json.dumps(throttled), "not json", '{"no": "id"}', json.dumps(fine))
    results, response = dispatch(event, door.client(), FUNCTION)

    ids = [record["messageId"] for record in event["Records"]]
    assert response == {"batchItemFailures": [{"itemIdentifier": i} for i in ids[:3]]}
    assert [r.outcome for r in results] == [Outcome.RETRY] * 3 + [Outcome.STARTED]
    assert results[0].reason == "TooManyRequestsException"
    assert len(door.sent) == 2  # a poison message is never sent to Lambda


def test_an_order_id_with_a_lone_surrogate_is_started_not_a_crash() -> None:
    """JSON may escape a lone surrogate ("\\ud800"), which UTF-8 cannot encode: the payload
    escapes it again (ASCII JSON), so the message is started like any other and the batch's
    other messages are not retried with it."""
    door = FrontDoor(_fake_start)
    event = sqs_event('{"order_id": "o-\\ud800", "amount": 1}', json.dumps(order()))
    results, response = dispatch(event, door.client(), FUNCTION)

    assert response == {"batchItemFailures": []}
    assert [r.outcome for r in results] == [Outcome.STARTED, Outcome.STARTED]
    assert json.loads(door.sent[0].payload) == {"order": {"order_id": "o-\ud800", "amount": 1}}


# --- the workflow, in the durable SDK's local runner --------------------------------------


def test_each_step_acts_once_across_the_suspensions_and_replays(
    workflow: Workflow, store: Store
) -> None:
    the_order = order()
    done = answer(workflow.run(the_order))

    providers = workflow.providers
    oid = the_order["order_id"]
    assert providers.effects == {("charge", oid): 1, ("ship", oid): 1, ("email", oid): 1}
    assert len(providers.calls) == 3  # no step of a replay called its provider again
    assert workflow.invocations >= 3  # two waits: the first invocation and two replays at least
    assert done["status"] == "completed"
    keys = [key for _, _, key in providers.calls]
    assert len(set(keys)) == 3
    assert all(key.startswith("eo-step-") for key in keys)

    record = store.get(SCOPE, oid)
    assert record is not None
    assert record.status is Status.COMPLETED
    assert record.result == done["result"]
    assert [(p.position, p.name) for _, p in sorted(record.steps.items())] == [
        (1, "charge"),
        (2, "ship"),
        (3, "email"),
    ]


def test_a_second_execution_for_the_order_runs_nothing_again(
    workflow: Workflow, store: Store
) -> None:
    """AWS's gap: an event source mapping's retry starts a new execution, with no checkpoints.
    The order's key is completed: the new execution is answered from it."""
    the_order = order()
    first = answer(workflow.run(the_order))
    second = answer(workflow.run(the_order))

    assert second == {
        "order_id": the_order["order_id"],
        "status": "completed",
        "result": first["result"],
    }
    assert len(workflow.providers.calls) == 3


def test_an_execution_with_other_content_under_the_order_id_runs_nothing(
    workflow: Workflow,
) -> None:
    """The same order id with another amount, invoked directly (no dispatcher to refuse it by
    name): the key's fingerprint differs, the claim is a MISMATCH, and no step runs."""
    the_order = order()
    answer(workflow.run(the_order))
    changed = answer(workflow.run({**the_order, "amount": 43}))

    assert changed["status"] == "mismatch"
    assert len(workflow.providers.calls) == 3


def test_a_lost_provider_reply_is_sent_again_under_the_same_idempotency_key(
    workflow: Workflow, store: Store
) -> None:
    """The charge acted but its reply was lost: no recovery point, the key FAILED (retryable),
    the execution failed. The next execution for the order charges again with the same key,
    and the provider answers the first charge instead of charging twice."""
    workflow.providers.lose_reply_once.add("charge")
    the_order = order()
    oid = the_order["order_id"]
    assert workflow.run(the_order).status is InvocationStatus.FAILED
    record = store.get(SCOPE, oid)
    assert record is not None
    assert record.status is Status.FAILED
    assert record.steps == {}

    done = answer(workflow.run(the_order))

    providers = workflow.providers
    charges = providers.keys("charge")
    assert len(charges) == 2
    assert charges[0] == charges[1]
    assert providers.effects == {("charge", oid): 1, ("ship", oid): 1, ("email", oid): 1}
    assert done["result"]["charge"] == {"charge_id": "charge-0"}


def test_a_new_execution_after_a_failed_one_resumes_after_its_finished_steps(
    workflow: Workflow, store: Store
) -> None:
    """The carrier is down: the execution fails after the charge, a suspension and a replay. A
    new execution for the order (a redrive under a new name, or an event source mapping's
    retry) has none of the first one's checkpoints; the charge's recovery point answers it, and
    the card is not charged twice."""
    providers = workflow.providers
    providers.down.add("ship")
    the_order = order()
    oid = the_order["order_id"]
    failed = workflow.run(the_order)
    assert failed.status is InvocationStatus.FAILED
    assert workflow.invocations >= 2  # the ship step ran in the replay after the first wait
    assert providers.effects == {("charge", oid): 1}
    record = store.get(SCOPE, oid)
    assert record is not None
    assert record.status is Status.FAILED
    assert record.error is not None
    assert record.error.retryable

    providers.down.clear()
    done = answer(workflow.run(the_order))

    assert providers.effects == {("charge", oid): 1, ("ship", oid): 1, ("email", oid): 1}
    assert len(providers.keys("charge")) == 1  # the recovery point answered the second execution
    assert done["status"] == "completed"


def test_two_executions_at_once_for_one_order_act_once(workflow: Workflow, store: Store) -> None:
    """Without the dispatcher's name (an event source mapping invoking the workflow itself, a
    retry while the first execution waits), two executions run the same order at once. The one
    holding the key does the steps; the other is answered "in progress" (or, if it comes after,
    "completed") and runs none."""
    the_order = order()
    body = payload(the_order)
    arns = [workflow.start(None, body), workflow.start(None, body)]
    answers = [answer(workflow.wait(arn)) for arn in arns]

    oid = the_order["order_id"]
    assert workflow.providers.effects == {("charge", oid): 1, ("ship", oid): 1, ("email", oid): 1}
    assert sorted(a["status"] for a in answers) in (
        ["completed", "completed"],
        ["completed", "in_progress"],
    )
    record = store.get(SCOPE, oid)
    assert record is not None
    assert record.status is Status.COMPLETED


# --- all of it: SQS messages -> dispatcher -> Invoke by name -> durable executions ----------


def test_redelivered_messages_make_one_execution_and_one_effect_per_step(
    workflow: Workflow, store: Store
) -> None:
    door = FrontDoor(workflow.start)
    a, b = order(), order()
    first = sqs_event(json.dumps(a), json.dumps(b), json.dumps(a))
    _, response = dispatch(first, door.client(), FUNCTION)
    assert response == {"batchItemFailures": []}
    for arn in door.started:
        answer(workflow.wait(arn))
    # The whole batch again, after the executions finished (a lost delete, a redrive).
    dispatch(first, door.client(), FUNCTION)

    assert len(door.sent) == 6
    assert len(door.started) == 2  # one execution per order
    for the_order in (a, b):
        oid = the_order["order_id"]
        assert [
            workflow.providers.effects[(what, oid)] for what in ("charge", "ship", "email")
        ] == [1, 1, 1]
        record = store.get(SCOPE, oid)
        assert record is not None
        assert record.status is Status.COMPLETED
