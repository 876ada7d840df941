"""Every consumer's queue and DLQ take SQS's 1 MiB messages, on the dev and prod stages; a DLQ
smaller than its queue is refused at synth (a large message could then not be dead-lettered)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from exactly_once_cdk.consumer import MAX_MESSAGE_BYTES, IdempotentConsumer
from exactly_once_cdk.layer import ExactlyOnceLayer
from exactly_once_cdk.tables import IdempotencyTable
from infra.consumers import CONSUMERS
from infra.topics import TOPICS
from tests.infra.conftest import Synth

QUEUE = "AWS::SQS::Queue"


def source_queues_and_dlqs(synth: Synth) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(source queue, its DLQ) properties, for every queue with a redrive policy."""
    queues = synth.resources(QUEUE)
    pairs = []
    for resource in queues.values():
        redrive = resource["Properties"].get("RedrivePolicy")
        if redrive is not None:
            dlq_id = redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
            pairs.append((resource["Properties"], queues[dlq_id]["Properties"]))
    return pairs


@pytest.mark.parametrize("stage", ["default_synth", "variant_synth"], ids=["dev", "prod"])
def test_each_consumer_queue_and_its_dlq_take_1_mib(
    stage: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(stage)
    pairs = source_queues_and_dlqs(synth)
    assert len(pairs) == len(CONSUMERS)  # every consumer has one, FIFO ones included
    assert MAX_MESSAGE_BYTES == 1_048_576
    for source, dlq in pairs:
        assert source["MaximumMessageSize"] == MAX_MESSAGE_BYTES
        assert dlq["MaximumMessageSize"] == MAX_MESSAGE_BYTES
    # A subscriber's DLQ takes Lambda's on-failure record, which wraps the whole SNS event.
    subscribers = [sub.id for topic in TOPICS for sub in topic.subscribers]
    assert subscribers
    for subscriber in subscribers:
        dlq = synth.props(QUEUE, f"{subscriber}DeadLetterQueue")
        assert dlq["MaximumMessageSize"] == MAX_MESSAGE_BYTES


def consumer(stack: Stack, **props: Any) -> IdempotentConsumer:
    return IdempotentConsumer(
        stack,
        "Orders",
        code=lambda_.Code.from_inline("def handle(event, context): pass"),
        table=IdempotencyTable(stack, "Table"),
        layer=ExactlyOnceLayer(stack, "Layer"),
        **props,
    )


def test_a_dlq_smaller_than_its_queue_is_refused() -> None:
    with pytest.raises(ValueError, match="a DLQ must accept every message its queue accepts"):
        consumer(Stack(App(), "Small"), dead_letter_queue_props={"max_message_size_bytes": 262_144})


def test_both_may_be_made_smaller_together() -> None:
    small = {"max_message_size_bytes": 262_144}
    built = consumer(Stack(App(), "Both"), queue_props=small, dead_letter_queue_props=small)
    for queue in (built.queue, built.dead_letter_queue):
        assert cast(sqs.CfnQueue, queue.node.default_child).maximum_message_size == 262_144
