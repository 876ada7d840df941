"""On the local stack, queue URLs print as the emulator's, never as real AWS's (issue 26,
defect 9): moto's CloudFormation gives `https://sqs.us-east-1.amazonaws.com/<account>/<name>`
for a queue's Ref, so the stack's outputs (and everything the CLI printed from them) looked
like a real account's.

The stack lives in a moto server, as the local stack's does; the URL expected is the one moto's
own SQS answers with (GetQueueUrl).
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from exactly_once_ops.targets import emulator_queue_urls, is_aws_endpoint
from tests.cli.support import REGION, Invoke, counts

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@pytest.fixture
def moto_sqs(moto_endpoint: str) -> SQSClient:
    return boto3.client("sqs", endpoint_url=moto_endpoint, region_name=REGION)


@pytest.fixture
def stack(moto_endpoint: str) -> str:
    """A stack with a consumer's queue and DLQ, their URLs as outputs (the queues' Refs)."""
    name = f"Urls{uuid.uuid4().hex[:8]}"
    template = {
        "Resources": {
            "OrdersQueue": {"Type": "AWS::SQS::Queue"},
            "OrdersDlq": {"Type": "AWS::SQS::Queue"},
        },
        "Outputs": {
            "OrdersQueueUrl": {"Value": {"Ref": "OrdersQueue"}},
            "OrdersDeadLetterQueueUrl": {"Value": {"Ref": "OrdersDlq"}},
        },
    }
    cloudformation = boto3.client("cloudformation", endpoint_url=moto_endpoint, region_name=REGION)
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))
    return name


def queue_url(sqs: SQSClient, stack: str, logical_id: str) -> str:
    """The queue's URL as moto's SQS names it."""
    (url,) = sqs.list_queues(QueueNamePrefix=f"{stack}-{logical_id}")["QueueUrls"]
    return sqs.get_queue_url(QueueName=url.rsplit("/", 1)[1])["QueueUrl"]


def test_consumers_prints_the_emulators_urls(
    cli: Invoke, moto_endpoint: str, moto_sqs: SQSClient, stack: str
) -> None:
    result = cli("--endpoint-url", moto_endpoint, "consumers", "--stack", stack)
    assert result.exit_code == 0, result.output
    assert "amazonaws.com" not in result.output
    for logical_id in ("OrdersQueue", "OrdersDlq"):
        url = queue_url(moto_sqs, stack, logical_id)
        assert url.startswith(f"{moto_endpoint}/")
        assert url in result.output


def test_send_names_and_uses_the_emulators_url(
    cli: Invoke, moto_endpoint: str, moto_sqs: SQSClient, stack: str
) -> None:
    url = queue_url(moto_sqs, stack, "OrdersQueue")
    result = cli(
        "--endpoint-url",
        moto_endpoint,
        "send",
        "--stack",
        stack,
        "--consumer",
        "orders",
        "--count",
        "2",
    )
    assert result.exit_code == 0, result.output
    assert f"sending 2 message(s) to {url}" in result.output
    assert "amazonaws.com" not in result.output
    assert counts(moto_sqs, url) == (2, 0)


def outputs_of(*values: str) -> dict[str, Any]:
    return {
        "Stacks": [
            {"Outputs": [{"OutputKey": f"K{i}", "OutputValue": v} for i, v in enumerate(values)]}
        ]
    }


def test_only_aws_form_queue_urls_are_rewritten() -> None:
    parsed = outputs_of(
        "https://sqs.eu-west-1.amazonaws.com/123456789012/orders.fifo",
        "arn:aws:sqs:us-east-1:123456789012:orders",
        "https://abc.execute-api.us-east-1.amazonaws.com/",
        "http://localhost:4566/000000000000/already-local",
    )
    emulator_queue_urls("http://localhost:5000/")(parsed=parsed)
    assert [o["OutputValue"] for o in parsed["Stacks"][0]["Outputs"]] == [
        "http://localhost:5000/123456789012/orders.fifo",
        "arn:aws:sqs:us-east-1:123456789012:orders",
        "https://abc.execute-api.us-east-1.amazonaws.com/",
        "http://localhost:4566/000000000000/already-local",
    ]


@pytest.mark.parametrize(
    ("url", "aws"),
    [
        ("https://sqs.us-east-1.amazonaws.com", True),
        ("https://vpce-1a2b.sqs.us-east-1.vpce.amazonaws.com", True),
        ("http://localhost:54759", False),
        ("http://127.0.0.1:4566", False),
    ],
)
def test_is_aws_endpoint(url: str, aws: bool) -> None:
    assert is_aws_endpoint(url) is aws
