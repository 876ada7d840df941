"""Output LocalDynamoDbEndpoint: only a local deploy (context localDynamoDbEndpoint) has it.

The deployed local stack's output is checked in tests/e2e (test_up_status_down, test_local_stack).
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk.assertions import Template

from infra.application import cdk_json_context, create_app
from tests.infra.conftest import Synth


def test_the_real_template_has_no_local_endpoint(default_synth: Synth) -> None:
    assert "LocalDynamoDbEndpoint" not in default_synth.template["Outputs"]


def test_the_local_context_adds_the_output(tmp_path: Path) -> None:
    context = {
        **cdk_json_context(),
        "localStack": True,
        "localDynamoDbEndpoint": "http://127.0.0.1:8000",
    }
    _, stack = create_app(context, outdir=str(tmp_path), nag=False)
    Template.from_stack(stack).has_output(
        "LocalDynamoDbEndpoint", {"Value": "http://127.0.0.1:8000"}
    )
