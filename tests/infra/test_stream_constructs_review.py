"""Review defects of the stream consumer constructs: grants that miss their resource when a value
arrives as a token or through the props override, and a record age the stream cannot hold."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Duration, Fn
from aws_cdk import aws_kinesis as kinesis

from exactly_once_cdk import (
    DynamoDbStreamConsumer,
    KafkaConsumer,
    KinesisStreamConsumer,
    MskCluster,
)
from tests.infra.test_stream_constructs import (
    CLUSTER_ARN,
    one,
    probe,
    source_table,
    statements_of,
    template_of,
)
from tests.infra.test_topic import INLINE

TOPIC_ARN = "arn:aws:kafka:us-east-1:123456789012:topic/orders/0a1b2c3d-4e5f-6789/orders"
GROUP_ARN = "arn:aws:kafka:us-east-1:123456789012:group/orders/0a1b2c3d-4e5f-6789/Probe-Events"


def evaluate(value: Any, imports: dict[str, str]) -> Any:
    """The few intrinsic functions an ARN built from a token uses, evaluated as CloudFormation
    would (the partition is "aws")."""
    if isinstance(value, list):
        return [evaluate(item, imports) for item in value]
    if not isinstance(value, dict):
        return value
    ((name, argument),) = value.items()
    if name == "Ref":
        assert argument == "AWS::Partition"
        return "aws"
    if name == "Fn::ImportValue":
        return imports[argument]
    if name == "Fn::Join":
        separator, parts = argument
        return str(separator).join(evaluate(parts, imports))
    if name == "Fn::Split":
        separator, text = argument
        return str(evaluate(text, imports)).split(separator)
    if name == "Fn::Select":
        index, items = argument
        return evaluate(items, imports)[int(index)]
    raise AssertionError(f"unexpected intrinsic {name}")


@pytest.mark.parametrize("from_token", [False, True])
def test_msk_iam_grants_name_the_clusters_topic_and_group(from_token: bool) -> None:
    """An MSK cluster's ARN is often a token (a cluster in the same app, an import): the topic
    and group ARNs must still carry the cluster's name and UUID, or Lambda's IAM-authenticated
    poller is refused DescribeTopic, ReadData and the group's offsets."""
    stack, table, layer = probe()
    arn = Fn.import_value("ClusterArn") if from_token else CLUSTER_ARN
    KafkaConsumer(
        stack,
        "Events",
        source=MskCluster(arn),
        topic="orders",
        code=INLINE,
        table=table,
        layer=layer,
    )
    by_sid = statements_of(template_of(stack), "Events")
    imports = {"ClusterArn": CLUSTER_ARN}
    assert evaluate(by_sid["ReadKafkaTopic"]["Resource"], imports) == TOPIC_ARN
    assert evaluate(by_sid["CommitKafkaGroupOffsets"]["Resource"], imports) == GROUP_ARN


def test_a_kms_stream_asked_for_through_stream_props_is_decryptable() -> None:
    """`stream_props={"encryption": KMS}` makes kinesis.Stream create a customer key: the
    function must be granted kms:Decrypt on it, as with `encryption_key`."""
    stack, table, layer = probe()
    KinesisStreamConsumer(
        stack,
        "Orders",
        code=INLINE,
        table=table,
        layer=layer,
        stream_props={"encryption": kinesis.StreamEncryption.KMS},
    )
    template = template_of(stack)
    key_id, _ = one(template, "AWS::KMS::Key", "OrdersStreamKey")
    decrypt = statements_of(template, "Orders").get("DecryptStream")
    assert decrypt is not None
    assert decrypt["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_record_age_past_the_kinesis_retention_is_refused() -> None:
    """A record older than the stream's retention is trimmed before the mapping gives it up:
    the on-failure queue would name records the stream no longer has."""
    stack, table, layer = probe()
    with pytest.raises(ValueError, match="max_record_age 172800 is not within"):
        KinesisStreamConsumer(
            stack, "Old", code=INLINE, table=table, layer=layer, max_record_age=Duration.days(2)
        )
    KinesisStreamConsumer(  # a retention that holds it
        stack,
        "Kept",
        code=INLINE,
        table=table,
        layer=layer,
        max_record_age=Duration.days(2),
        stream_props={"retention_period": Duration.days(3)},
    )


def test_record_age_past_the_table_streams_24_hours_is_refused() -> None:
    stack, table, layer = probe()
    with pytest.raises(ValueError, match="max_record_age 172800 is not within"):
        DynamoDbStreamConsumer(
            stack,
            "Old",
            source_table=source_table(stack),
            code=INLINE,
            table=table,
            layer=layer,
            max_record_age=Duration.days(2),
        )


def test_an_on_demand_stream_through_stream_props() -> None:
    """The docstring offers on-demand mode through `stream_props`; kinesis.Stream refuses a
    shard count beside it, so the default single shard must not be passed then."""
    stack, table, layer = probe()
    KinesisStreamConsumer(
        stack,
        "Orders",
        code=INLINE,
        table=table,
        layer=layer,
        stream_props={"stream_mode": kinesis.StreamMode.ON_DEMAND},
    )
    _, stream = one(template_of(stack), "AWS::Kinesis::Stream", "OrdersStream")
    assert stream["Properties"]["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
    assert "ShardCount" not in stream["Properties"]
