"""A misspelt consumer, API or subscriber name says so and lists the names there are (issue 26,
defect 6): `send --consumer ordrs --count 5` complained about --template, `invoke ordrs` about a
missing code folder. Against a moto stack with this repository's outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.cli.support import Invoke, QueuePair

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient


@pytest.fixture
def stack(cloudformation: CloudFormationClient, orders: QueuePair) -> None:
    outputs = {
        "OrdersQueueUrl": orders.source,
        "OrdersDeadLetterQueueUrl": orders.dlq,
        "OrdersFunctionName": "orders-fn",
        "PaymentsQueueUrl": orders.source,
        "PaymentsDeadLetterQueueUrl": orders.dlq,
        "PaymentsFunctionName": "payments-fn",
        "PaymentsApiFunctionName": "payments-api-fn",
        "PaymentsApiUrl": "https://abc.execute-api.us-east-1.amazonaws.com/",
        "SalesTopicArn": "arn:aws:sns:us-east-1:123456789012:sales",
        "SalesCounterFunctionName": "sales-fn",
        "SalesCounterDeadLetterQueueUrl": orders.dlq,
        "IdempotencyTableName": "idem",
    }
    template = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    cloudformation.create_stack(StackName="ExactlyOnceSqs", TemplateBody=json.dumps(template))


EVENTS = Path(__file__).resolve().parents[2] / "events"
CONSUMERS = "the consumers are: orders, payments (did you mean 'orders'?)"


@pytest.mark.parametrize(
    "args",
    [
        ["send", "--consumer", "ordrs", "--count", "5"],
        ["send", "--consumer", "ordrs", "--body", "{}"],
        ["replay", "copy", "--consumer", "ordrs"],
        ["replay", "native", "--consumer", "ordrs"],
        ["replay", "list", "--consumer", "ordrs"],
    ],
    ids=["send-count", "send-body", "replay-copy", "replay-native", "replay-list"],
)
def test_a_misspelt_consumer_lists_the_consumers(cli: Invoke, stack: None, args: list[str]) -> None:
    result = cli(*args)
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line == f"error: no consumer 'ordrs' in stack 'ExactlyOnceSqs'; {CONSUMERS}"


def test_a_misspelt_function_to_invoke_lists_every_function(cli: Invoke, stack: None) -> None:
    result = cli("invoke", "ordrs", "--event", str(EVENTS / "orders-single.json"))
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line == (
        "error: no consumer, API or subscriber 'ordrs' in stack 'ExactlyOnceSqs'; they are: "
        "orders, payments, paymentsapi, salescounter (did you mean 'orders'?)"
    )


def test_a_misspelt_subscriber_lists_the_subscribers(cli: Invoke, stack: None) -> None:
    result = cli("replay", "subscriber", "salescountr")
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line == (
        "error: no subscriber 'salescountr' in stack 'ExactlyOnceSqs'; the subscribers are: "
        "salescounter (did you mean 'salescounter'?)"
    )
