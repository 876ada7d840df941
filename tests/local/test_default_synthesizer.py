"""A user's app keeps the CDK's default synthesizer (this repository's app switches to
`CliCredentialsStackSynthesizer` under `localStack`): it must deploy into moto too.

The default synthesizer's stack makes the CLI read the bootstrap version from SSM
(`/cdk-bootstrap/hnb659fds/version`) and gives the template a `BootstrapVersion` parameter of
that name; nothing bootstraps moto, so `local_deploy` writes the parameter itself. The app
passes none of the local-only switches either: the consumer's mapping is deployed disabled
because the constructs follow the `localStack` context (exactly_once_cdk/local_mode.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from local_aws.app_source import AppSource
from local_aws.local_deploy import deploy
from local_aws.moto_server import REGION, MotoServer

APP = """
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk import IdempotencyTable, IdempotentConsumer

app = App()
stack = Stack(app, "Plain")  # the default synthesizer
IdempotentConsumer(
    stack,
    "Tickets",
    code=lambda_.Code.from_asset("tickets"),
    table=IdempotencyTable(stack, "Records"),
    layer=lambda_.LayerVersion.from_layer_version_arn(
        stack, "Layer", "arn:aws:lambda:us-east-1:123456789012:layer:eonce:1"
    ),
)
app.synth()
"""


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer().start()
    try:
        yield server
    finally:
        server.stop()


def test_an_app_with_the_default_synthesizer_deploys_into_moto(
    tmp_path: Path, moto: MotoServer
) -> None:
    app = tmp_path / "plain"
    (app / "tickets").mkdir(parents=True)
    (app / "tickets" / "handler.py").write_text("def handle(event, context):\n    return None\n")
    (app / "app.py").write_text(APP)
    (app / "cdk.json").write_text(json.dumps({"app": "python app.py"}))

    deployment = deploy(moto.endpoint, app=AppSource.resolve(str(app)), work_dir=tmp_path / "w")
    try:
        assert deployment.stack_name == "Plain"
        assert "TicketsQueueUrl" in deployment.outputs
        template = json.loads((deployment.assembly_dir / "Plain.template.json").read_text())
        # The default synthesizer's shape, not CliCredentialsStackSynthesizer's.
        assert template["Parameters"]["BootstrapVersion"]["Default"] == (
            "/cdk-bootstrap/hnb659fds/version"
        )
        client = boto3.client(
            "lambda",
            endpoint_url=moto.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        (mapping,) = client.list_event_source_mappings(
            FunctionName=deployment.outputs["TicketsFunctionName"]
        )["EventSourceMappings"]
        assert mapping["State"] == "Disabled"
    finally:
        deployment.remove()
