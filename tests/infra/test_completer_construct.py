"""`AbandonedWorkCompleter`: the completer on an EventBridge schedule, cdk-nag clean, with the
grants it needs on the store; and its handler (the layer's `exactly_once.steps.scheduled`)
run as Lambda would, with the environment the construct gives it, against DynamoDB Local."""

from __future__ import annotations

import importlib
import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk import App, Duration, Validations
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.schema import Status
from exactly_once_cdk import AbandonedWorkCompleter
from exactly_once_cdk.completer import HANDLER
from exactly_once_cdk.tables import RECORD_ACTIONS
from exactly_once_ops.lambda_context import LocalLambdaContext
from local_aws.dynamodb_local import DynamoDBLocal
from tests.infra.test_stream_constructs import of_type, one, probe
from tests.infra.test_template import actions, ref_id
from tests.infra.test_topic import INLINE

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def granted_actions(template: dict[str, Any], role_prefix: str) -> set[str]:
    """Every action the policies attached to the role (by logical-id prefix) allow."""
    role_id, _ = one(template, "AWS::IAM::Role", role_prefix)
    return {
        action
        for policy in of_type(template, "AWS::IAM::Policy").values()
        if role_id in [ref_id(r) for r in policy["Properties"]["Roles"]]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in actions(statement)
    }


def test_scheduled_with_its_grants_and_nag_clean(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path))
    stack, table, layer = probe(app)
    AbandonedWorkCompleter(
        stack,
        "Completer",
        code=INLINE,
        resumables=["shop.checkout:checkout"],
        table=table,
        layer=layer,
        interval=Duration.minutes(10),
        max_attempts=5,
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    template = dict(Template.from_stack(stack).to_json())
    app.synth()  # raises on any unacknowledged nag finding
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert [v for p in report["pluginReports"] for v in p["violations"]] == []

    _, function = one(template, "AWS::Lambda::Function", "CompleterFunction")
    props = function["Properties"]
    assert props["Handler"] == HANDLER
    variables = props["Environment"]["Variables"]
    assert variables["RESUMABLE_MODULES"] == "shop.checkout:checkout"
    assert (variables["COMPLETER_LIMIT"], variables["COMPLETER_MAX_ATTEMPTS"]) == ("100", "5")
    assert "IDEMPOTENCY_TABLE" in variables
    _, rule = one(template, "AWS::Events::Rule", "CompleterSchedule")
    assert rule["Properties"]["ScheduleExpression"] == "rate(10 minutes)"
    assert rule["Properties"]["Targets"][0]["RetryPolicy"] == {"MaximumRetryAttempts": 0}
    granted = granted_actions(template, "CompleterFunctionRole")
    assert set(RECORD_ACTIONS) <= granted  # it takes keys and records their outcomes
    assert "dynamodb:Query" in granted  # the pending index, never a Scan
    assert "dynamodb:Scan" not in granted
    assert len(of_type(template, "AWS::CloudWatch::Alarm", "CompleterErrorsAlarm")) == 1


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"resumables": []}, "MODULE or MODULE:NAME"),
        ({"resumables": ["a:b,c:d"]}, "without commas"),
        ({"limit": 0}, "at least 1"),
        ({"timeout": Duration.minutes(10)}, "longer than its interval"),
    ],
)
def test_refuses_what_would_not_run(options: dict[str, Any], says: str) -> None:
    stack, table, layer = probe()
    arguments: dict[str, Any] = {"resumables": ["shop:checkout"], **options}
    with pytest.raises(ValueError, match=says):
        AbandonedWorkCompleter(stack, "C", code=INLINE, table=table, layer=layer, **arguments)


SHOP = """
from exactly_once import resumable

DOWN = {{"email"}}


@resumable("{scope}", lease_s=30)
def checkout(lock, order):
    done = {{}}
    for name in ("charge", "ship", "email"):
        def run(step, name=name):
            if name in DOWN:
                raise RuntimeError(name + " provider down")
            return name + "-" + order["id"]
        done[name] = lock.step(name, run)
    return done
"""


def test_the_handler_finishes_a_key_with_the_constructs_environment(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ddb: DynamoDBClient,
    idempotency_table: str,
    dynamodb_local: DynamoDBLocal,
) -> None:
    name = f"shop_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(SHOP.format(scope=f"sched-{name}"))
    monkeypatch.syspath_prepend(str(tmp_path))
    shop = importlib.import_module(name)
    store = IdempotencyStore(idempotency_table, client=ddb)
    with pytest.raises(RuntimeError, match="email provider down"):
        shop.checkout.run("o-1", {"id": "o-1"}, store=store)
    shop.DOWN.clear()

    stack, table, layer = probe()
    AbandonedWorkCompleter(
        stack, "Completer", code=INLINE, resumables=[name], table=table, layer=layer
    )
    function = one(dict(Template.from_stack(stack).to_json()), "AWS::Lambda::Function", "C")[1]
    for variable, value in function["Properties"]["Environment"]["Variables"].items():
        monkeypatch.setenv(variable, value if isinstance(value, str) else idempotency_table)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    scheduled = importlib.import_module(HANDLER.rsplit(".", 1)[0])

    counts = scheduled.handle({}, LocalLambdaContext("completer", timeout_s=60))
    assert counts == {"Completed": 1, "StillFailing": 0, "Skipped": 0}
    record = store.get(f"sched-{name}", "o-1")
    assert record is not None
    assert record.status is Status.COMPLETED
    assert record.result == {"charge": "charge-o-1", "ship": "ship-o-1", "email": "email-o-1"}
    assert scheduled.handle({}, LocalLambdaContext("completer", timeout_s=60)) == {
        "Completed": 0,
        "StillFailing": 0,
        "Skipped": 0,
    }
