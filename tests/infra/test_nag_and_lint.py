"""cdk-nag (AwsSolutions) finds nothing unacknowledged; cfn-lint finds nothing at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import Validations
from aws_cdk import aws_sqs as sqs
from cfnlint.api import ManualArgs, lint_file

from infra.application import cdk_json_context, create_app
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


def test_every_acknowledgment_gives_a_specific_reason(variant_synth: Synth) -> None:
    key = Validations.ACKNOWLEDGED_RULES_METADATA_KEY
    acknowledged: dict[str, str] = {}
    for construct in variant_synth.stack.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == key:
                acknowledged.update(entry.data)
    assert acknowledged, "the xray variant needs its IAM5 acknowledgment"
    for rule, reason in acknowledged.items():
        assert "AwsSolutions-" in rule
        assert len(reason) > 40, (rule, reason)
        assert "xray" in reason.lower(), (rule, reason)


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
