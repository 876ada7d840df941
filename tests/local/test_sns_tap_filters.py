"""A subscriber's filter policy survives the tap that takes its Lambda subscription's place.

On AWS, SNS never invokes a subscribed function with a message its subscription's filter
policy rejects. The local stack removes that subscription from moto and subscribes a tap queue
instead; without the policy on the tap, the function would run for every message the topic
carries. Checked on a moto server, for a policy on the attributes and one on the body.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from exactly_once_cdk.outputs import KIND_SUBSCRIBER
from exactly_once_ops.app_model import DeployedApp, Function, Subscriber, Topic
from local_aws.moto_server import REGION, MotoServer, aws_env
from local_aws.sns_delivery import RetryPolicy
from local_aws.sns_tap import bind_subscriber


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


def client(moto: MotoServer, service: str) -> Any:
    env = aws_env(moto.endpoint)
    return boto3.client(
        service,  # type: ignore[call-overload]
        region_name=REGION,
        endpoint_url=moto.endpoint,
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )


def tapped_bodies(
    moto: MotoServer, name: str, attributes: dict[str, str], tmp_path: Path
) -> list[str]:
    """Subscribe a function with `attributes`, bind it, publish a sale and a refund; the
    messages of the tap queue."""
    sns, sqs, lambda_ = (client(moto, s) for s in ("sns", "sqs", "lambda"))
    topic_arn = sns.create_topic(Name=f"sales-{name}")["TopicArn"]
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    role = client(moto, "iam").create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("handler.py", "def handle(event, context):\n    return None\n")
    function_arn = lambda_.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="handler.handle",
        Code={"ZipFile": archive.getvalue()},
    )["FunctionArn"]
    sns.subscribe(
        TopicArn=topic_arn, Protocol="lambda", Endpoint=function_arn, Attributes=attributes
    )
    function = Function("CounterFn", KIND_SUBSCRIBER, "handler.handle", tmp_path, {})
    subscriber = Subscriber("Counter", function, "SalesTopic", 2, "CounterDlq")
    app = DeployedApp(
        stack_name="Test",
        assembly_dir=tmp_path,
        subscribers=(subscriber,),
        topics=(Topic("Sales", "SalesTopic", (), ("Counter",)),),
        physical_ids={"SalesTopic": topic_arn, "CounterFn": name, "CounterDlq": dlq},
    )
    binding = bind_subscriber(
        lambda_, sns, sqs, app, subscriber, stack=name, retry=RetryPolicy(delays_s=(0.1,))
    )
    for kind in ("sale", "refund"):
        sns.publish(
            TopicArn=topic_arn,
            Message=json.dumps({"kind": kind}),
            MessageAttributes={"kind": {"DataType": "String", "StringValue": kind}},
        )
    got = sqs.receive_message(QueueUrl=binding.tap_queue_url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"])["Message"] for m in got.get("Messages", [])]


def test_the_tap_keeps_an_attribute_filter_policy(moto: MotoServer, tmp_path: Path) -> None:
    policy = {"FilterPolicy": json.dumps({"kind": ["sale"]})}
    assert tapped_bodies(moto, "on-attributes", policy, tmp_path) == [json.dumps({"kind": "sale"})]


def test_the_tap_keeps_a_body_filter_policy(moto: MotoServer, tmp_path: Path) -> None:
    policy = {
        "FilterPolicy": json.dumps({"kind": ["refund"]}),
        "FilterPolicyScope": "MessageBody",
    }
    assert tapped_bodies(moto, "on-body", policy, tmp_path) == [json.dumps({"kind": "refund"})]


def test_a_subscription_without_a_policy_taps_everything(moto: MotoServer, tmp_path: Path) -> None:
    bodies = tapped_bodies(moto, "unfiltered", {}, tmp_path)
    assert sorted(bodies) == sorted(json.dumps({"kind": k}) for k in ("sale", "refund"))
