"""docs/infrastructure.md's "Production checklist", item by item, against the prod synth.

The ids come from the document itself, so the list and the checks cannot drift apart: a new
item without a check fails, and so does a check whose item was removed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from cfnlint.api import ManualArgs, lint_file

from exactly_once import ledger
from exactly_once.stores import schema
from exactly_once_cdk.alarms import ONE_EVENT, SUSTAINED
from exactly_once_cdk.lock_monitor import HEARTBEAT
from exactly_once_cdk.tables import BATCH_ACTIONS, RECORD_ACTIONS
from exactly_once_cdk.widgets import EVENT_SOURCE_MAPPING_METRICS, OUTCOME_METRICS
from infra.checkov_scan import ACKNOWLEDGMENTS, load_acknowledgments
from infra.consumers import CONSUMERS, ROOT
from infra.settings import Settings
from infra.stack import stack_tags
from infra.streams import STREAMS
from infra.topics import TOPICS
from tests.infra.conftest import VARIANT_CONTEXT, Synth
from tests.infra.test_nag_and_lint import nag_violations
from tests.infra.test_runtimes import layer_asset
from tests.infra.test_template import (
    actions,
    alarm_kind,
    dashboard_widgets,
    evaluation,
    graphed,
    role_statements,
)
from tests.layer_bytecode import bytecode_tag

DOC = ROOT / "docs" / "infrastructure.md"
SUBSCRIBERS = [sub for topic in TOPICS for sub in topic.subscribers]


def checklist_ids() -> list[str]:
    """The `Id` column of the table under "## Production checklist"."""
    section = DOC.read_text().split("## Production checklist", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z-]+)` \|", section, flags=re.MULTILINE)


def stack_name(synth: Synth) -> None:
    name = f"{VARIANT_CONTEXT['stackName']}-{VARIANT_CONTEXT['stage']}"
    assert synth.stack.stack_name == name
    for queue in synth.resources("AWS::SQS::Queue").values():
        assert queue["Properties"]["QueueName"].startswith(f"{name}-")


def explicit_target(synth: Synth) -> None:
    assert (synth.stack.account, synth.stack.region) == (
        VARIANT_CONTEXT["account"],
        VARIANT_CONTEXT["region"],
    )


def termination_protection(synth: Synth) -> None:
    assert synth.stack.termination_protection is True


def tags(synth: Synth) -> None:
    wanted = stack_tags(synth.stack.settings)
    assert set(wanted) == {"Project", "Stage", "ManagedBy"}
    assert wanted["Stage"] == "prod"
    assert synth.stack.tags.tag_values() == wanted
    tagged = [r for r in synth.template["Resources"].values() if "Tags" in r.get("Properties", {})]
    assert len(tagged) > len(CONSUMERS)
    for resource in tagged:
        found = resource["Properties"]["Tags"]
        values = (
            found if isinstance(found, dict) else {t["Key"]: t["Value"] for t in found}
        )  # SSM-style maps exist too
        assert wanted.items() <= values.items(), resource["Type"]


def retained_data(synth: Synth) -> None:
    resources = {
        **synth.resources("AWS::DynamoDB::Table"),
        **synth.resources("AWS::SQS::Queue"),
        **synth.resources("AWS::Kinesis::Stream"),
    }
    dead_letter = [k for k in resources if "DeadLetterQueue" in k]
    assert len(dead_letter) == len(CONSUMERS) + len(SUBSCRIBERS) + len(STREAMS)
    for logical_id, resource in resources.items():
        assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == (
            "Retain",
            "Retain",
        ), logical_id
    for table in synth.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["DeletionProtectionEnabled"] is True


def compiled_layer(synth: Synth) -> None:
    layer = synth.stack.layer
    target = layer.target
    assert layer.bytecode
    machine = "aarch64" if target.architecture == "arm64" else "x86_64"
    args = target.pip_args()
    assert f"manylinux2014_{machine}" in args
    assert f"manylinux_2_28_{machine}" in args
    asset = layer_asset(synth)
    sources = list(asset.rglob("*.py"))
    assert sources
    tag = bytecode_tag(target.python_version)  # the target's, or the suite's stand-in's
    compiled = {p.name for p in asset.rglob("*.pyc")}
    assert compiled == {f"{p.stem}.{tag}.pyc" for p in sources}
    with pytest.raises(ValueError, match="layerBytecode"):
        Settings.from_context({**VARIANT_CONTEXT, "layerBytecode": "false"}.get)


def least_privilege(synth: Synth) -> None:
    assert "dynamodb:DeleteItem" not in RECORD_ACTIONS
    by_sid = role_statements(synth, f"{CONSUMERS[0].id}FunctionRole")
    assert sorted(actions(by_sid["IdempotencyRecords"])) == sorted(RECORD_ACTIONS)
    assert sorted(actions(by_sid["IdempotencyBatches"])) == sorted(BATCH_ACTIONS)
    assert actions(by_sid["LedgerAppend"]) == ["dynamodb:PutItem"]
    monitor = role_statements(synth, "LockMonitorFunctionRole")
    assert actions(monitor["ReadPendingIndex"]) == ["dynamodb:Query"]


def alarm_evaluation(synth: Synth) -> None:
    seen = set()
    for logical_id, alarm in synth.resources("AWS::CloudWatch::Alarm").items():
        assert evaluation(alarm["Properties"]) == alarm_kind(logical_id), logical_id
        seen.add(alarm_kind(logical_id))
    assert {ONE_EVENT, SUSTAINED} <= seen


def monitor_heartbeat(synth: Synth) -> None:
    _, alarm = synth.resource("AWS::CloudWatch::Alarm", "LockMonitorStuckLocksAlarm")
    props = alarm["Properties"]
    assert props["TreatMissingData"] == "breaching"
    assert evaluation(props) == HEARTBEAT
    assert props["Period"] >= 60 * int(synth.stack.settings.lock_monitor_interval_minutes)


def index_and_conflicts(synth: Synth) -> None:
    names: list[tuple[str, str | None]] = []
    for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if "MetricName" in props:
            names.append((props["MetricName"], None))
        for metric in props.get("Metrics", []):
            stat = metric.get("MetricStat", {}).get("Metric", {})
            dims = {d["Name"]: d["Value"] for d in stat.get("Dimensions", [])}
            if "GlobalSecondaryIndexName" in dims:
                names.append((stat["MetricName"], dims["GlobalSecondaryIndexName"]))
    assert ("TransactionConflict", None) in names
    assert ("ReadThrottleEvents", schema.PENDING_INDEX) in names
    assert ("WriteThrottleEvents", schema.PENDING_INDEX) in names


def dashboard(synth: Synth) -> None:
    widgets = dashboard_widgets(synth)
    for spec in CONSUMERS:
        mapping = synth.props("AWS::Lambda::EventSourceMapping", spec.id)
        assert mapping["MetricsConfig"] == {"Metrics": ["EventCount"]}
        graphed_names = [
            graphed(m)[1] for m in widgets[f"{spec.id} event source mapping"]["metrics"]
        ]
        assert graphed_names == list(EVENT_SOURCE_MAPPING_METRICS)
    for name in [c.id for c in CONSUMERS] + [s.id for s in SUBSCRIBERS]:
        outcomes = [graphed(m)[1] for m in widgets[f"{name} outcomes"]["metrics"]]
        assert outcomes == list(OUTCOME_METRICS)


def warm_throughput(synth: Synth) -> None:
    props = synth.props("AWS::DynamoDB::Table", "TablesIdempotency")
    assert props["WarmThroughput"] == {
        "ReadUnitsPerSecond": int(VARIANT_CONTEXT["warmReadUnitsPerSecond"]),
        "WriteUnitsPerSecond": int(VARIANT_CONTEXT["warmWriteUnitsPerSecond"]),
    }


def ledger_ttl(synth: Synth) -> None:
    props = synth.props("AWS::DynamoDB::Table", "TablesLedger")
    assert props["TimeToLiveSpecification"] == {
        "AttributeName": ledger.TTL_ATTRIBUTE,
        "Enabled": True,
    }


def bootstrap(synth: Synth) -> None:
    makefile = (ROOT / "Makefile").read_text()
    (recipe,) = re.findall(r"^bootstrap:.*\n\t(.+)$", makefile, flags=re.MULTILINE)
    assert recipe.strip() == "cdk bootstrap $(CDK_ARGS)"
    # `cdk bootstrap` with the app bootstraps the stacks' environments: prod names its own.
    assert not synth.stack.account.startswith("${Token")


def queue_name_rule(synth: Synth) -> None:
    assert all("QueueName" in q["Properties"] for q in synth.resources("AWS::SQS::Queue").values())
    assert "You must wait 60 seconds after deleting a queue" in DOC.read_text()


def checkov(synth: Synth) -> None:
    acknowledgments = load_acknowledgments(yaml.safe_load(ACKNOWLEDGMENTS.read_text()))
    assert all(ack.reason for ack in acknowledgments)
    assert "checkov==$(CHECKOV_VERSION)" in (ROOT / "Makefile").read_text()
    # the one false positive is acknowledged because SSE-SQS really is on
    for queue in synth.resources("AWS::SQS::Queue").values():
        assert queue["Properties"]["SqsManagedSseEnabled"] is True


def nag_and_lint(synth: Synth) -> None:
    assert nag_violations(synth.template_path.parent) == []
    matches = lint_file(synth.template_path, ManualArgs(regions=[str(VARIANT_CONTEXT["region"])]))
    # test_nag_and_lint.py's one tolerated finding: CDK's DependsOn next to the role's GetAtt
    assert [m for m in matches if m.rule.id != "W3005"] == []


CHECKS: dict[str, Callable[[Synth], Any]] = {
    "stack-name": stack_name,
    "explicit-target": explicit_target,
    "termination-protection": termination_protection,
    "tags": tags,
    "retained-data": retained_data,
    "compiled-layer": compiled_layer,
    "least-privilege": least_privilege,
    "alarm-evaluation": alarm_evaluation,
    "monitor-heartbeat": monitor_heartbeat,
    "index-and-conflicts": index_and_conflicts,
    "dashboard": dashboard,
    "warm-throughput": warm_throughput,
    "ledger-ttl": ledger_ttl,
    "bootstrap": bootstrap,
    "queue-name-rule": queue_name_rule,
    "checkov": checkov,
    "nag-and-lint": nag_and_lint,
}


def test_the_document_and_the_checks_list_the_same_items() -> None:
    ids = checklist_ids()
    assert len(ids) == len(set(ids)), ids
    assert ids == list(CHECKS)


@pytest.mark.parametrize("item", checklist_ids())
def test_the_prod_synth_satisfies(item: str, variant_synth: Synth) -> None:
    assert variant_synth.stack.settings.is_prod
    CHECKS[item](variant_synth)
