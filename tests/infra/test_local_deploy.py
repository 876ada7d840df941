"""Deploy the app into moto with the pinned CLI, as `make run` will, and check what came up.

moto drops TTL, point-in-time recovery, layers, queue and topic policies, the redrive allow
policy, alarms and the asynchronous-invocation config (AWS::Lambda::EventInvokeConfig);
test_template.py and test_topic.py check those on the template instead. The topic's queue
subscription is written into the topic (moto has no AWS::SNS::Subscription), and the Lambda
subscription stays out (moto's SNS would invoke the function through Docker).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from local_aws.local_deploy import DeployError, deploy
from local_aws.moto_server import REGION, MotoServer
from tests.infra.test_template import LOCAL_OUTPUTS

STACK = "ExactlyOnceSqs"


@dataclass(frozen=True)
class Deployed:
    server: MotoServer
    outputs: dict[str, str]
    outdir: Path

    def client(self, service: str) -> Any:
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=self.server.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    outdir = tmp_path_factory.mktemp("cdk-local")
    with MotoServer() as server:
        try:
            deployment = deploy(server.endpoint, outdir=outdir)
        except Exception:
            print(server.log_tail())
            raise
        assert deployment.stack_name == STACK  # no stackName context: the app's own name
        yield Deployed(server, deployment.outputs, outdir)


def test_stack_created_with_every_output(deployed: Deployed) -> None:
    (stack,) = deployed.client("cloudformation").describe_stacks(StackName=STACK)["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE"
    assert set(deployed.outputs) == LOCAL_OUTPUTS
    assert {o["OutputKey"] for o in stack["Outputs"]} == LOCAL_OUTPUTS


def test_local_template_needs_no_bootstrap_and_maps_nothing(deployed: Deployed) -> None:
    template = json.loads((deployed.outdir / f"{STACK}.template.json").read_text())
    assert "Rules" not in template  # no bootstrap-version check: moto has no bootstrap stack
    mappings = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::EventSourceMapping"
    ]
    # The two queues' and the Kinesis stream's (the local stack's pollers read them instead).
    assert [m["Properties"]["Enabled"] for m in mappings] == [False, False, False]


@pytest.mark.parametrize(("cid", "fifo"), [("Orders", False), ("Payments", True)])
def test_queues_resolve(deployed: Deployed, cid: str, fifo: bool) -> None:
    sqs = deployed.client("sqs")
    out = deployed.outputs
    queue = sqs.get_queue_attributes(QueueUrl=out[f"{cid}QueueUrl"], AttributeNames=["All"])
    dlq = sqs.get_queue_attributes(QueueUrl=out[f"{cid}DeadLetterQueueUrl"], AttributeNames=["All"])
    attrs, dlq_attrs = queue["Attributes"], dlq["Attributes"]
    assert attrs["QueueArn"] == out[f"{cid}QueueArn"]
    assert dlq_attrs["QueueArn"] == out[f"{cid}DeadLetterQueueArn"]
    assert json.loads(attrs["RedrivePolicy"]) == {
        "deadLetterTargetArn": out[f"{cid}DeadLetterQueueArn"],
        "maxReceiveCount": 5,
    }
    assert attrs["VisibilityTimeout"] == "180"
    assert dlq_attrs["MessageRetentionPeriod"] == str(14 * 86_400)
    assert attrs["SqsManagedSseEnabled"] == dlq_attrs["SqsManagedSseEnabled"] == "true"
    assert attrs.get("FifoQueue") == dlq_attrs.get("FifoQueue") == ("true" if fifo else None)
    if fifo:
        assert attrs["ContentBasedDeduplication"] == "false"


def test_tables_exist(deployed: Deployed) -> None:
    ddb = deployed.client("dynamodb")
    idem = ddb.describe_table(TableName=deployed.outputs["IdempotencyTableName"])["Table"]
    assert idem["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert [i["IndexName"] for i in idem["GlobalSecondaryIndexes"]] == ["pending-index"]
    ledger = ddb.describe_table(TableName=deployed.outputs["LedgerTableName"])["Table"]
    assert [k["AttributeName"] for k in ledger["KeySchema"]] == ["pk", "sk"]


def test_functions_exist_with_their_environment(deployed: Deployed) -> None:
    lam = deployed.client("lambda")
    out = deployed.outputs
    for key in (
        "OrdersFunctionName",
        "PaymentsFunctionName",
        "LockMonitorFunctionName",
        "SalesCounterFunctionName",
    ):
        config = lam.get_function(FunctionName=out[key])["Configuration"]
        assert (config["Runtime"], config["Handler"]) == ("python3.13", "handler.handle")
        variables = config["Environment"]["Variables"]
        assert variables["IDEMPOTENCY_TABLE"] == out["IdempotencyTableName"]
    orders = lam.get_function(FunctionName=out["OrdersFunctionName"])["Configuration"]
    assert orders["Environment"]["Variables"]["DEAD_LETTER_QUEUE_URL"].endswith(
        out["OrdersDeadLetterQueueUrl"].rsplit("/", 1)[1]
    )


def test_mappings_are_disabled_so_moto_never_consumes(deployed: Deployed) -> None:
    lam, sqs = deployed.client("lambda"), deployed.client("sqs")
    mappings = lam.list_event_source_mappings()["EventSourceMappings"]
    assert sorted(m["EventSourceArn"] for m in mappings) == sorted(
        [
            deployed.outputs["OrdersQueueArn"],
            deployed.outputs["PaymentsQueueArn"],
            deployed.outputs["OrderStreamStreamArn"],
        ]
    )
    assert {m["State"] for m in mappings} == {"Disabled"}
    url = deployed.outputs["OrdersQueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"orderId": "o-1"}))
    received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)["Messages"]
    assert json.loads(received[0]["Body"]) == {"orderId": "o-1"}


def test_alarm_topic_exists(deployed: Deployed) -> None:
    arn = deployed.outputs["AlarmTopicArn"]
    attributes = deployed.client("sns").get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["TopicArn"] == arn


def test_the_topic_fans_out_to_the_orders_queue_only(deployed: Deployed) -> None:
    """moto's SNS delivers to the subscribed queue (the envelope, not raw); nothing is
    subscribed by Lambda, so a publish never makes moto run a function."""
    sns, sqs = deployed.client("sns"), deployed.client("sqs")
    out = deployed.outputs
    arn = out["SalesTopicArn"]
    attributes = sns.get_topic_attributes(TopicArn=arn)["Attributes"]
    assert attributes["KmsMasterKeyId"].startswith("arn:aws:kms:")
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=arn)["Subscriptions"]
    assert [(s["Protocol"], s["Endpoint"]) for s in subscriptions] == [
        ("sqs", out["OrdersQueueArn"])
    ]
    published = sns.publish(TopicArn=arn, Message=json.dumps({"orderId": "sale-1", "amount": 3}))
    (message,) = sqs.receive_message(QueueUrl=out["OrdersQueueUrl"], WaitTimeSeconds=2)["Messages"]
    sqs.delete_message(QueueUrl=out["OrdersQueueUrl"], ReceiptHandle=message["ReceiptHandle"])
    envelope = json.loads(message["Body"])
    assert (envelope["Type"], envelope["MessageId"], envelope["TopicArn"]) == (
        "Notification",
        published["MessageId"],
        arn,
    )
    assert json.loads(envelope["Message"]) == {"orderId": "sale-1", "amount": 3}


def test_the_subscriber_has_its_dead_letter_queue(deployed: Deployed) -> None:
    out = deployed.outputs
    config = deployed.client("lambda").get_function(FunctionName=out["SalesCounterFunctionName"])[
        "Configuration"
    ]
    variables = config["Environment"]["Variables"]
    assert variables["SUBSCRIBER_SCOPE"] == "sales"
    assert variables["LEDGER_TABLE"] == out["LedgerTableName"]
    dlq_name = out["SalesCounterDeadLetterQueueUrl"].rsplit("/", 1)[1]
    assert variables["DEAD_LETTER_QUEUE_URL"].endswith(dlq_name)
    attrs = deployed.client("sqs").get_queue_attributes(
        QueueUrl=out["SalesCounterDeadLetterQueueUrl"], AttributeNames=["All"]
    )["Attributes"]
    assert attrs["QueueArn"] == out["SalesCounterDeadLetterQueueArn"]
    assert attrs["SqsManagedSseEnabled"] == "true"
    assert attrs["MessageRetentionPeriod"] == str(14 * 86_400)


def test_redeploy_updates_in_place(deployed: Deployed) -> None:
    """`make run` deploys again into a running moto: updates must work, names must hold."""
    outputs = deploy(deployed.server.endpoint, {"batchSize": 5}, outdir=deployed.outdir).outputs
    (stack,) = deployed.client("cloudformation").describe_stacks(StackName=STACK)["Stacks"]
    assert stack["StackStatus"] == "UPDATE_COMPLETE"
    for key in ("OrdersQueueUrl", "PaymentsQueueUrl", "IdempotencyTableName", "SalesTopicArn"):
        assert outputs[key] == deployed.outputs[key]
    subscriptions = deployed.client("sns").list_subscriptions_by_topic(
        TopicArn=outputs["SalesTopicArn"]
    )["Subscriptions"]
    assert len(subscriptions) == 1  # not subscribed twice
    mappings = deployed.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    # batchSize is the queues' (a stream's mapping keeps its own 100).
    assert {m["BatchSize"] for m in mappings if ":sqs:" in m["EventSourceArn"]} == {5}


def test_a_failed_deploy_says_why(deployed: Deployed) -> None:
    with pytest.raises(DeployError, match=r"context 'maxReceiveCount': 0 is outside 1\.\.1000"):
        deploy(deployed.server.endpoint, {"maxReceiveCount": 0}, outdir=deployed.outdir)
