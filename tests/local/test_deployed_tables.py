"""The local stack mirrors every DynamoDB table the deployed stack has into DynamoDB Local,
found in its template, whatever the tables are called and whichever outputs the app writes.

The functions' DynamoDB calls all go to DynamoDB Local, so a table left behind in moto (an
app's own table, or a store table made without its output) would not exist for them. The
deployment is a small stack of two plain tables, created in moto by CloudFormation in place
of `cdk deploy` (the stack under test is what the local stack does after the deploy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from local_aws import local_stack
from local_aws.local_deploy import Deployment
from local_aws.local_stack import LocalStack

STACK = "tables-only"


def table(name: str) -> dict[str, Any]:
    return {
        "Type": "AWS::DynamoDB::Table",
        "Properties": {
            "TableName": name,
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        },
    }


TEMPLATE = {"Resources": {"Orders": table("shop-orders"), "Records": table("shop-records")}}


def test_every_table_of_the_stack_is_mirrored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def deploy(endpoint_url: str, context: dict[str, Any], **_: Any) -> Deployment:
        assembly = tmp_path / "assembly"
        assembly.mkdir()
        (assembly / "stack.template.json").write_text(json.dumps(TEMPLATE))
        artifact = {
            "type": "aws:cloudformation:stack",
            "properties": {"templateFile": "stack.template.json", "stackName": STACK},
        }
        (assembly / "manifest.json").write_text(json.dumps({"artifacts": {"S": artifact}}))
        cloudformation = stack.client("cloudformation")
        cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(TEMPLATE))
        return Deployment(STACK, {}, assembly)  # no outputs: none name a table

    monkeypatch.setattr(local_stack, "deploy", deploy)
    stack = LocalStack()
    with stack:
        assert sorted(stack.app.tables) == ["Orders", "Records"]
        mirrored = stack.ddb().list_tables()["TableNames"]
        assert sorted(mirrored) == ["shop-orders", "shop-records"]
