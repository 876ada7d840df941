"""The consumers of a table's stream are found in the cloud assembly only when asked for
(`tables=True`, what `eonce up` asks): `make run`'s stream part puts Kinesis records, so its
bindings stay the Kinesis consumers alone."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk import DynamoDbStreamConsumer, IdempotencyTable, KinesisStreamConsumer
from local_aws.stream_bindings import DYNAMODB, KINESIS, stream_consumers

LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:other:1"


def test_a_table_streams_consumer_is_found_with_tables(tmp_path: Path) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "handler.py").write_text("")
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "Shop")
    table = IdempotencyTable(stack, "Records")
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN)
    orders = dynamodb.Table(
        stack,
        "Orders",
        partition_key=dynamodb.Attribute(name="orderId", type=dynamodb.AttributeType.STRING),
        stream=dynamodb.StreamViewType.NEW_IMAGE,
    )
    code = lambda_.Code.from_asset(str(folder))
    DynamoDbStreamConsumer(
        stack, "OrderChanges", source_table=orders, code=code, table=table, layer=layer
    )
    KinesisStreamConsumer(stack, "OrderStream", code=code, table=table, layer=layer)
    app.synth()
    assembly = tmp_path / "cdk.out"

    (kinesis,) = stream_consumers(assembly, "Shop")
    both = stream_consumers(assembly, "Shop", tables=True)

    assert (kinesis.id, kinesis.source) == ("OrderStream", KINESIS)
    found = sorted((spec.id, spec.source, spec.stream.startswith("Orders")) for spec in both)
    assert found == [("OrderChanges", DYNAMODB, True), ("OrderStream", KINESIS, False)]
