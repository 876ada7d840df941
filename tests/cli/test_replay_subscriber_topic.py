"""`eonce replay SalesCounter --dry-run` works as docs/cli.md writes it on the local stack
(issue 26, defect 7): with no Lambda subscription in moto (the local stack's tap stands in for
it) and two topics in the stack (Sales, and the alarm topic), a `permanent` message's topic was
unknown and it was "not replayable ... pass --topic-arn". The stack's template names the
subscriber's topic (the constructs' metadata, or its AWS::SNS::Subscription).

The stack is a CloudFormation stack in in-process moto, shaped as the constructs deploy one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once_ops.stack_template import subscribed_topics, topics_in_template
from tests.cli.support import Invoke

DOCUMENTED = Path(__file__).resolve().parents[2] / "docs" / "cli.md"

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_sqs import SQSClient

STACK = "ExactlyOnceSqs"
FUNCTION = "ExactlyOnceSqs-SalesCounterFunction"
TOPIC_REF = {"Ref": "SalesTopic"}


def template() -> dict[str, Any]:
    """Two topics; the subscriber's function names Sales in its metadata and has no
    subscription (what the local stack leaves in moto)."""
    role_policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "lambda.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    return {
        "Resources": {
            "SalesTopic": {"Type": "AWS::SNS::Topic"},
            "AlarmsTopic": {"Type": "AWS::SNS::Topic"},
            "SalesCounterDlq": {"Type": "AWS::SQS::Queue"},
            "SalesCounterRole": {
                "Type": "AWS::IAM::Role",
                "Properties": {"AssumeRolePolicyDocument": role_policy},
            },
            "SalesCounterFunction": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "FunctionName": FUNCTION,
                    "Runtime": "python3.12",
                    "Handler": "handler.handle",
                    "Role": {"Fn::GetAtt": ["SalesCounterRole", "Arn"]},
                    "Code": {"ZipFile": "def handle(event, context):\n    return None\n"},
                },
                "Metadata": {
                    "ExactlyOnce": {"kind": "subscriber", "id": "SalesCounter", "topic": TOPIC_REF}
                },
            },
        },
        "Outputs": {
            "SalesTopicArn": {"Value": {"Ref": "SalesTopic"}},
            "AlarmTopicArn": {"Value": {"Ref": "AlarmsTopic"}},
            "SalesCounterFunctionName": {"Value": {"Ref": "SalesCounterFunction"}},
            "SalesCounterDeadLetterQueueUrl": {"Value": {"Ref": "SalesCounterDlq"}},
        },
    }


@pytest.fixture
def outputs(cloudformation: CloudFormationClient) -> dict[str, str]:
    cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(template()))
    found = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]["Outputs"]
    return {o["OutputKey"]: o["OutputValue"] for o in found}


def dead_letter_permanent(sqs: SQSClient, dlq: str) -> None:
    """What the layer dead-letters for a subscriber's permanent failure."""
    sqs.send_message(
        QueueUrl=dlq,
        MessageBody=json.dumps({"orderId": "o-1"}),
        MessageAttributes={
            "eo-error-type": {"DataType": "String", "StringValue": "PermanentError"},
            "eo-original-message-id": {"DataType": "String", "StringValue": "sns-1"},
        },
    )


def test_the_documented_dry_run_finds_the_topic(
    cli: Invoke, sqs: SQSClient, outputs: dict[str, str]
) -> None:
    assert "`eonce replay SalesCounter --dry-run`" in DOCUMENTED.read_text(encoding="utf-8")
    dead_letter_permanent(sqs, outputs["SalesCounterDeadLetterQueueUrl"])
    result = cli("replay", "SalesCounter", "--dry-run", "--wait-seconds", "0")
    assert result.exit_code == 0, result.output
    assert "topic is unknown" not in result.output
    assert "would replay 1 message(s)" in result.output


def test_the_template_names_the_subscribers_topic_not_the_others(
    cloudformation: CloudFormationClient, outputs: dict[str, str]
) -> None:
    topics = subscribed_topics(cloudformation, STACK, FUNCTION)
    assert topics == [outputs["SalesTopicArn"]]
    assert outputs["AlarmTopicArn"] not in topics


def test_a_lambda_subscription_resource_names_it_too() -> None:
    physical = {
        "Fn": FUNCTION,
        "Other": "another-function",
        "SalesTopic": "arn:aws:sns:us-east-1:123456789012:Sales",
        "AlarmsTopic": "arn:aws:sns:us-east-1:123456789012:Alarms",
    }

    def subscription(protocol: str, function: str, topic: str) -> dict[str, Any]:
        endpoint = {"Fn::GetAtt": [function, "Arn"]}
        properties = {"Protocol": protocol, "Endpoint": endpoint, "TopicArn": {"Ref": topic}}
        return {"Type": "AWS::SNS::Subscription", "Properties": properties}

    resources = {
        "Fn": {"Type": "AWS::Lambda::Function"},
        "ToSales": subscription("lambda", "Fn", "SalesTopic"),
        "OtherToAlarms": subscription("lambda", "Other", "AlarmsTopic"),
        "QueueToAlarms": subscription("sqs", "Fn", "AlarmsTopic"),
    }
    assert topics_in_template({"Resources": resources}, physical, FUNCTION) == [
        physical["SalesTopic"]
    ]


def test_an_unreadable_template_leaves_the_stacks_topics(
    cloudformation: CloudFormationClient,
) -> None:
    assert subscribed_topics(cloudformation, "NoSuchStack", FUNCTION) == []
