"""The local stack finds an app's Kinesis stream consumers in its cloud assembly: the mapping
whose source is a stream of the stack, its function's staged code, its construct id (the
outputs' prefix), in a plain stack and in a stack inside a `Stage`; a queue consumer beside it
stays a queue consumer.

Each app is synthesized in-process with the `exactly_once_cdk` constructs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, Stack, Stage
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk import IdempotencyTable, IdempotentConsumer, KinesisStreamConsumer
from local_aws.cloud_assembly import read_assembly
from local_aws.stream_bindings import StreamBinding, describe_stream_bindings, stream_consumers

LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:other:1"


def code(root: Path, text: str) -> lambda_.Code:
    folder = root / "src" / text
    folder.mkdir(parents=True)
    (folder / "handler.py").write_text(f"WHO = {text!r}\n")
    return lambda_.Code.from_asset(str(folder))


@pytest.mark.parametrize("staged", [False, True])
def test_the_kinesis_consumer_is_found_with_its_code(tmp_path: Path, staged: bool) -> None:
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(Stage(app, "Dev") if staged else app, "Shop")
    table = IdempotencyTable(stack, "Records")
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN)
    KinesisStreamConsumer(
        stack, "OrderStream", code=code(tmp_path, "stream"), table=table, layer=layer
    )
    IdempotentConsumer(stack, "Invoices", code=code(tmp_path, "queue"), table=table, layer=layer)
    app.synth()
    assembly = tmp_path / "cdk.out"
    name = "Dev-Shop" if staged else "Shop"

    (spec,) = stream_consumers(assembly, name)

    assert spec.id == "OrderStream"
    assert (spec.function.code_folder() / "handler.py").read_text() == "WHO = 'stream'\n"
    assert spec.function.environment["CONSUMER_SCOPE"] == "orderstream"
    assert spec.stream.startswith("OrderStream")  # the AWS::Kinesis::Stream
    assert spec.mapping.startswith("OrderStreamEventSourceMapping")
    model = read_assembly(assembly, name)
    assert [c.id for c in model.consumers] == ["Invoices"]


def test_bindings_are_described_in_one_line() -> None:
    binding = StreamBinding(
        function_name="fn",
        source_dir="/src",
        handler="handler.handle",
        environment={"CONSUMER_SCOPE": "orders", "DEAD_LETTER_QUEUE_URL": "http://q"},
        timeout_s=3,
        consumer="OrderStream",
        stream_name="s",
        stream_arn="arn:aws:kinesis:us-east-1:123456789012:stream/s",
        bisect_on_error=True,
        max_retry_attempts=10,
    )
    assert binding.scope == "orders"
    assert binding.dead_letter_queue_url == "http://q"
    assert describe_stream_bindings([binding]) == (
        "OrderStream: batch 100, bisect on, 10 retries, timeout 3s"
    )
    assert binding.settings("us-east-1").function_arn.endswith(":function:fn")
