"""Stream consumers are an entry-point kind of their own (issue 28): the stream constructs mark
their function as the others do (`ExactlyOnce`: kind "stream", the construct id, the source),
the app model lists them (`DeployedApp.stream_consumers`), `eonce invoke` finds their code in
the app's cloud assembly, and `eonce consumers` lists them from the stack's outputs.

Before, the stream constructs put no metadata on their function (the template reader refused
any kind it did not know), so invoke said "no consumer, API or subscriber 'orderstream'" and
`eonce consumers` said a stack of stream consumers alone had none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk import (
    DynamoDbStreamConsumer,
    IdempotencyTable,
    IdempotentConsumer,
    KafkaConsumer,
    KinesisStreamConsumer,
    MskCluster,
)
from local_aws.cloud_assembly import read_assembly
from tests.cli.support import Invoke

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient

EVENTS = Path(__file__).resolve().parents[2] / "events"
LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:other:1"
CLUSTER_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/orders/0a1b2c3d-4e5f-6789"

pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")


def code(root: Path, folder: str) -> lambda_.Code:
    """A handler that says whose code it is and answers as a stream consumer with nothing
    to retry."""
    path = root / folder
    path.mkdir(parents=True)
    (path / "reader.py").write_text(
        "def read(event, context):\n"
        f"    print('RAN', {folder!r})\n"
        "    return {'batchItemFailures': []}\n"
    )
    return lambda_.Code.from_asset(str(path))


def synthesize(outdir: Path, src: Path) -> Path:
    """An app with a queue consumer and one stream consumer of each source, whose ids are not
    their code folders' names."""
    app = App(outdir=str(outdir))
    stack = Stack(app, "Shop", env={"account": "123456789012", "region": "us-east-1"})
    shared: dict[str, Any] = {
        "table": IdempotencyTable(stack, "Records"),
        "layer": lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN),
        "handler": "reader.read",
    }
    IdempotentConsumer(stack, "Invoices", code=code(src, "billing"), **shared)
    KinesisStreamConsumer(stack, "OrderStream", code=code(src, "kinesis_orders"), **shared)
    changes = dynamodb.Table(
        stack,
        "Items",
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        stream=dynamodb.StreamViewType.NEW_IMAGE,
    )
    DynamoDbStreamConsumer(
        stack, "Changes", source_table=changes, code=code(src, "table_changes"), **shared
    )
    KafkaConsumer(
        stack,
        "Events",
        source=MskCluster(CLUSTER_ARN),
        topic="orders",
        code=code(src, "kafka_events"),
        **shared,
    )
    app.synth()
    return outdir


@pytest.fixture
def assembly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`cdk synth` was run in the working folder: the app's assembly is ./cdk.out."""
    here = tmp_path / "work"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("EONCE_STATE_DIR", str(tmp_path / "state"))
    return synthesize(here / "cdk.out", tmp_path / "src")


def test_the_app_model_lists_each_stream_consumer_with_its_source(assembly: Path) -> None:
    model = read_assembly(assembly, "Shop")
    assert [c.id for c in model.consumers] == ["Invoices"]
    found = {s.id: s for s in model.stream_consumers}
    assert {name: s.source for name, s in found.items()} == {
        "OrderStream": "kinesis",
        "Changes": "dynamodb",
        "Events": "kafka",
    }
    assert str(found["OrderStream"].stream).startswith("OrderStream")  # its AWS::Kinesis::Stream
    assert str(found["Changes"].stream).startswith("Items")  # the table whose stream it reads
    assert found["Events"].stream is None  # the cluster is not the stack's
    assert found["Changes"].function.scope == "changes"  # CONSUMER_SCOPE, as the construct set
    code_folder = found["Events"].function.code_folder()
    assert (code_folder / "reader.py").is_file()
    assert "'kafka_events'" in (code_folder / "reader.py").read_text()


@pytest.mark.parametrize(
    ("name", "sample", "folder"),
    [
        ("orderstream", "stream-kinesis-orders.json", "kinesis_orders"),
        ("Changes", "stream-dynamodb-orders.json", "table_changes"),
        ("EVENTS", "kafka-msk-orders.json", "kafka_events"),
    ],
    ids=["kinesis", "dynamodb", "kafka"],
)
def test_invoke_finds_a_stream_consumers_code_in_the_assembly(
    cli: Invoke, assembly: Path, name: str, sample: str, folder: str
) -> None:
    result = cli(
        "invoke",
        name,
        "--no-from-stack",
        "-e",
        str(EVENTS / sample),
        "--env",
        "IDEMPOTENCY_TABLE=t",
    )
    assert result.exit_code == 0, result.output
    (ran,) = [line for line in result.stdout.splitlines() if line.startswith("RAN ")]
    assert ran == f"RAN {folder}"
    assert '"batchItemFailures": []' in result.stdout


OUTPUTS = {  # what KinesisStreamConsumer and KafkaConsumer write, and a queue consumer's
    "OrdersQueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/shop-orders",
    "OrdersDeadLetterQueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/shop-dlq",
    "OrdersFunctionName": "shop-orders-fn",
    "OrderStreamFunctionName": "shop-orderstream-fn",
    "OrderStreamDeadLetterQueueArn": "arn:aws:sqs:us-east-1:123456789012:shop-OrderStream-dlq",
    "OrderStreamOnFailureQueueArn": "arn:aws:sqs:us-east-1:123456789012:shop-OrderStream-failed",
    "OrderStreamStreamName": "shop-order-stream",
    "OrderStreamStreamArn": "arn:aws:kinesis:us-east-1:123456789012:stream/shop-order-stream",
    "EventsFunctionName": "shop-events-fn",
    "EventsDeadLetterQueueArn": "arn:aws:sqs:us-east-1:123456789012:shop-Events-dlq",
    "EventsOnFailureQueueArn": "arn:aws:sqs:us-east-1:123456789012:shop-Events-failed",
}


def deploy(cloudformation: CloudFormationClient, name: str, outputs: dict[str, str]) -> None:
    template = {
        "Resources": {"Anything": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {key: {"Value": value} for key, value in outputs.items()},
    }
    cloudformation.create_stack(StackName=name, TemplateBody=json.dumps(template))


def test_consumers_lists_the_stream_consumers_after_the_queue_consumers(
    cli: Invoke, cloudformation: CloudFormationClient
) -> None:
    deploy(cloudformation, "Shop", OUTPUTS)
    result = cli("consumers", "--stack", "Shop")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.index("Shop: 1 consumer(s)") < out.index("Shop: 2 stream consumer(s)")
    (stream_row,) = [line for line in out.splitlines() if " orderstream " in line]
    assert "shop-order-stream" in stream_row
    assert "shop-orderstream-fn" in stream_row
    (kafka_row,) = [line for line in out.splitlines() if " events " in line]
    assert "shop-events-fn" in kafka_row
    assert " - " in kafka_row  # no stream of the stack's own


def test_a_stack_of_stream_consumers_alone_has_consumers(
    cli: Invoke, cloudformation: CloudFormationClient
) -> None:
    streams = {key: value for key, value in OUTPUTS.items() if not key.startswith("Orders")}
    deploy(cloudformation, "Streams", streams)
    result = cli("consumers", "--stack", "Streams")
    assert result.exit_code == 0, result.output
    assert "Streams: 2 stream consumer(s)" in result.stdout
    assert "consumer(s)" not in result.stdout.replace("stream consumer(s)", "")
