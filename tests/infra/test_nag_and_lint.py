"""cdk-nag (AwsSolutions) finds nothing unacknowledged; cfn-lint finds nothing at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import Validations
from aws_cdk import aws_sqs as sqs
from cfnlint.api import ManualArgs, lint_file

from infra.application import cdk_json_context, create_app
from infra.streams import STREAMS
from infra.topics import TOPICS
from tests.infra.conftest import Synth


def nag_violations(outdir: Path) -> list[str]:
    report = json.loads((outdir / "validation-report.json").read_text())
    return [
        violation["ruleName"]
        for plugin in report["pluginReports"]
        if plugin["pluginName"] == "AwsSolutions"
        for violation in plugin["violations"]
    ]


@pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
def test_nag_clean(fixture: str, request: pytest.FixtureRequest) -> None:
    """The fixtures synthesize with the plugin on: reaching here means synthesis passed."""
    synth: Synth = request.getfixturevalue(fixture)
    assert nag_violations(synth.template_path.parent) == []


def test_nag_is_active_and_fails_synthesis(tmp_path: Path) -> None:
    """Without this, a silently unregistered plugin would make the clean checks meaningless."""
    app, stack = create_app(cdk_json_context(), outdir=str(tmp_path))
    sqs.Queue(stack, "Unencrypted", encryption=sqs.QueueEncryption.UNENCRYPTED)
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    assert {"AwsSolutions-SQS2", "AwsSolutions-SQS3", "AwsSolutions-SQS4"} <= set(
        nag_violations(tmp_path)
    )


def acknowledgments(synth: Synth) -> list[tuple[str, str, str]]:
    """(construct path, rule, reason) for every acknowledged nag rule in the stack (the
    metadata names a rule `Annotation::<rule>`)."""
    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    return [
        (construct.node.path, rule.removeprefix("Annotation::"), reason)
        for construct in synth.stack.node.find_all()
        for entry in construct.node.metadata
        if entry.type == key
        for rule, reason in entry.data.items()
    ]


# The only acknowledgments, each for a reason nag cannot see: X-Ray's actions take no resource,
# a subscriber's DLQ and a stream consumer's two queues (its DLQ, its mapping's on-failure
# destination) are dead-letter queues in ways nag does not recognize, and the runtime is
# the one the layer's bytecode is compiled for (3.13 by default; 3.14 needs none).
ACKNOWLEDGED: dict[str, tuple[str | tuple[str, ...], str]] = {
    "AwsSolutions-IAM5[Resource::*]": ("FunctionRole", "xray"),
    "AwsSolutions-SQS3": (("DeadLetterQueue", "OnFailureQueue"), "dead-letter queue"),
    "AwsSolutions-L1": ("Function", "compiled by the target's own interpreter"),
}


@pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
def test_every_acknowledgment_gives_a_specific_reason(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(fixture)
    found = acknowledgments(synth)
    rules = {rule for _, rule, _ in found}
    with_xray = fixture == "variant_synth"
    assert rules == (set(ACKNOWLEDGED) if with_xray else {"AwsSolutions-SQS3", "AwsSolutions-L1"})
    for path, rule, reason in found:
        where, why = ACKNOWLEDGED[rule]
        assert path.endswith(where), (path, rule)
        assert len(reason) > 40, (rule, reason)
        assert why in reason.lower(), (rule, reason)
    # The DLQ acknowledgment stays on the subscribers' and stream consumers' queues: SQS
    # consumers' DLQs (redrive targets) need none.
    subscribers = {sub.id for topic in TOPICS for sub in topic.subscribers}
    streams = {stream.id for stream in STREAMS}
    dlq_owners = {path.split("/")[1] for path, rule, _ in found if rule == "AwsSolutions-SQS3"}
    assert dlq_owners == subscribers | streams


@pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
def test_cfn_lint_clean(fixture: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(fixture)
    matches = lint_file(synth.template_path, ManualArgs(regions=["us-east-1", "eu-west-1"]))
    # lambda.Function adds DependsOn on its role next to the GetAtt of the role's ARN (W3005):
    # redundant, harmless, and made by CDK. Only exactly that finding is let through.
    findings = [
        str(m)
        for m in matches
        if not (
            m.rule.id == "W3005"
            and "/Properties/Role'" in m.message
            and "FunctionRole" in m.message
        )
    ]
    assert findings == []
