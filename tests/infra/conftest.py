"""Synthesize the app once per session (jsii start-up and synthesis cost seconds), with nag on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.application import cdk_json_context, create_app
from infra.stack import ExactlyOnceStack
from local_aws.local_deploy import LOCAL_DEFAULTS

# A second configuration that exercises every non-default branch in one synthesis.
VARIANT_CONTEXT: dict[str, Any] = {
    "stackName": "ExactlyOnceVariant",
    "stage": "prod",
    "account": "123456789012",  # a prod stage is refused without its account and region
    "region": "eu-west-1",
    "warmReadUnitsPerSecond": "15000",
    "warmWriteUnitsPerSecond": 5000,
    "xray": "true",  # as `-c xray=true` passes it
    "alarmEmail": "oncall@example.com",
    "functionTimeoutSeconds": "20",
    "batchingWindowSeconds": 5,
    "batchSize": 50,
    "logRetentionDays": 90,
    "consumers": {
        "Orders": {"maxReceiveCount": 3, "maxConcurrency": 20},
        "Payments": {"batchSize": 10},  # FIFO event sources take at most 10
    },
}


@dataclass(frozen=True)
class Synth:
    stack: ExactlyOnceStack
    template: dict[str, Any]
    assertions: Template
    template_path: Path

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == type_}

    def resource(self, type_: str, prefix: str) -> tuple[str, dict[str, Any]]:
        """The one resource of `type_` whose logical id starts with `prefix`."""
        found = [(k, v) for k, v in self.resources(type_).items() if k.startswith(prefix)]
        assert len(found) == 1, f"{type_} {prefix}: {[k for k, _ in found]}"
        return found[0]

    def props(self, type_: str, prefix: str) -> dict[str, Any]:
        return dict(self.resource(type_, prefix)[1]["Properties"])


def synthesize(overrides: Mapping[str, Any], outdir: Path) -> Synth:
    """Synthesize with cdk.json's context plus `overrides`; raises if nag finds anything."""
    app, stack = create_app({**cdk_json_context(), **overrides}, outdir=str(outdir))
    assembly = app.synth()
    path = Path(assembly.get_stack_artifact(stack.artifact_id).template_full_path)
    template = json.loads(path.read_text())
    return Synth(stack, template, Template.from_json(template), path)


@pytest.fixture(scope="session")
def default_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize({}, tmp_path_factory.mktemp("cdk-default"))


@pytest.fixture(scope="session")
def variant_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(VARIANT_CONTEXT, tmp_path_factory.mktemp("cdk-variant"))


# The PostgreSQL store (`-c store=postgres`): a dev stage, and the variant's prod stage with X-Ray.
POSTGRES_CONTEXT: dict[str, Any] = {"store": "postgres"}
POSTGRES_PROD_CONTEXT: dict[str, Any] = {
    **VARIANT_CONTEXT,
    "store": "postgres",
    # What `cdk synth` looks up (and caches in cdk.context.json) for an environment-bound VPC.
    f"availability-zones:account={VARIANT_CONTEXT['account']}:region={VARIANT_CONTEXT['region']}": [
        "eu-west-1a",
        "eu-west-1b",
        "eu-west-1c",
    ],
}


@pytest.fixture(scope="session")
def postgres_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(POSTGRES_CONTEXT, tmp_path_factory.mktemp("cdk-postgres"))


@pytest.fixture(scope="session")
def postgres_prod_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(POSTGRES_PROD_CONTEXT, tmp_path_factory.mktemp("cdk-postgres-prod"))


@pytest.fixture(scope="session")
def local_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The stack as `local_aws.local_deploy` deploys it into moto."""
    return synthesize({**LOCAL_DEFAULTS, "localStack": True}, tmp_path_factory.mktemp("cdk-local"))
