"""`make run`'s topic part: publish sales to the Sales topic with the duplicates SNS causes.

The AWS shop example counted a sale twice when SNS delivered its message twice. This workload
makes both kinds of duplicate happen on purpose:
- the same sale is published again (a new SNS MessageId, the same orderId), as a producer that
  retries its publish does;
- an SNS message already delivered is delivered a second time with the same MessageId, to
  every subscriber: into the direct subscriber's tap queue and into each subscribed queue, as
  SNS's at-least-once delivery does now and then.
Plus a few poison messages (not JSON) and sales that fail once. Every valid sale must then be
in the ledger exactly once per receiver: under the direct subscriber's scope (sales) and under
each fan-out queue consumer's (orders).
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from exactly_once_cdk.outputs import DEAD_LETTER_QUEUE_URL
from exactly_once_ops.local_state import utc_now
from exactly_once_ops.publish import publish_messages
from exactly_once_ops.send import OutgoingMessage
from exactly_once_ops.sns_events import published_attributes, sns_envelope, timestamp
from local_aws.demo import dead_letter_reasons
from local_aws.demo_workload import SendFailed

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

    from exactly_once_ops.app_model import Topic
    from local_aws.poller import FunctionBinding
    from local_aws.sns_delivery import SubscriberBinding

SUBJECT = "sale"
SALE_ATTRIBUTES: dict[str, MessageAttributeValueTypeDef] = {
    "kind": {"DataType": "String", "StringValue": "sale"}
}


@dataclass(frozen=True)
class TopicWorkload:
    sales: int = 40  # messages published in total
    duplicate_ratio: float = 0.25  # share that publishes an earlier sale again
    redeliveries: int = 5  # published messages SNS delivers a second time, to every receiver
    poison: int = 1  # messages that are not JSON
    transient_ratio: float = 0.05  # share of unique sales that fail once, then succeed
    work_ms: int = 20
    seed: int = 7


@dataclass(frozen=True)
class Receiver:
    """One subscriber of the topic as the report checks it: a direct subscriber (delivered
    through its tap) or a subscribed queue's consumer."""

    name: str  # SalesCounter, Orders
    kind: str  # "subscriber" or "queue"
    scope: str  # the idempotency scope its ledger entries are under
    delivery_url: str  # the tap or the queue: where SNS's copies land
    dead_letter_url: str


def topic_receivers(
    topic: Topic,
    subscribers: Sequence[SubscriberBinding],
    consumers: Sequence[FunctionBinding],
    outputs: Mapping[str, str],
) -> list[Receiver]:
    """The topic's direct subscribers and subscribed queues (as the deployed stack wires
    them), with the scope each runs under (its function's; else the constructs' default)."""
    receivers = [
        Receiver(
            name=b.label,
            kind="subscriber",
            scope=b.environment.get("SUBSCRIBER_SCOPE") or b.subscriber.lower(),
            delivery_url=b.tap_queue_url,
            dead_letter_url=b.dead_letter_queue_url,
        )
        for b in subscribers
        if b.subscriber in topic.subscribers
    ]
    for binding in consumers:
        if binding.consumer in topic.queues:
            receivers.append(
                Receiver(
                    name=binding.consumer,
                    kind="queue",
                    scope=binding.environment.get("CONSUMER_SCOPE") or binding.consumer.lower(),
                    delivery_url=binding.queue_url,
                    dead_letter_url=outputs[f"{binding.consumer}{DEAD_LETTER_QUEUE_URL}"],
                )
            )
    return receivers


@dataclass
class SalesPlan:
    messages: list[OutgoingMessage] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)  # each must take effect once per receiver
    duplicates: int = 0
    poison_bodies: set[str] = field(default_factory=set)

    @property
    def poison(self) -> int:
        return len(self.poison_bodies)


def plan_sales(workload: TopicWorkload, run_id: str, rng: random.Random) -> SalesPlan:
    poison = min(workload.poison, workload.sales)
    duplicates = min(round(workload.sales * workload.duplicate_ratio), workload.sales - poison)
    unique = workload.sales - poison - duplicates
    plan = SalesPlan(duplicates=duplicates)
    bodies = []
    for n in range(unique):
        sale: dict[str, Any] = {"orderId": f"s-{run_id}-{n}", "amount": 1 + n % 97}
        sale["workMs"] = workload.work_ms
        if rng.random() < workload.transient_ratio:
            sale["failTimes"] = 1
        bodies.append(json.dumps(sale))
        plan.keys.add(str(sale["orderId"]))
    repeats = [rng.choice(bodies) for _ in range(duplicates)] if bodies else []
    poisons = [f"sale {run_id}-{n}: amount=12 (not JSON)" for n in range(poison)]
    plan.poison_bodies = set(poisons)
    everything = bodies + repeats + poisons
    rng.shuffle(everything)
    plan.messages = [OutgoingMessage(body=b, attributes=SALE_ATTRIBUTES) for b in everything]
    return plan


@dataclass(frozen=True)
class SentTopicWorkload:
    """What was published and delivered again, and what the report subtracts and expects."""

    run_id: str
    topic: str
    topic_arn: str
    published: int
    duplicates: int  # sales published a second time
    redelivered: int  # messages delivered again (same MessageId) to every receiver
    poison: int
    expected_keys: list[str]
    receivers: list[Receiver]
    dead_letters_before: dict[str, dict[str, int]]
    throughput: float
    sent_at: str = ""


def redeliver(
    sqs: SQSClient, topic_arn: str, message_id: str, message: OutgoingMessage, urls: list[str]
) -> None:
    """SNS delivering a message once more: the same envelope (same MessageId) to each URL."""
    envelope = sns_envelope(
        message.body,
        topic_arn=topic_arn,
        message_id=message_id,
        sent_at=timestamp(),
        subject=SUBJECT,
        attributes=published_attributes(message.attributes),
    )
    for url in urls:
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(envelope))


def publish_topic_workload(
    sns: Any,
    sqs: SQSClient,
    topic: str,
    topic_arn: str,
    receivers: list[Receiver],
    workload: TopicWorkload,
) -> SentTopicWorkload:
    """Plan the sales (fresh keys), note the DLQs, publish, then deliver some messages again."""
    rng = random.Random(workload.seed)
    run_id = uuid.uuid4().hex[:6]
    plan = plan_sales(workload, run_id, rng)
    before = {r.name: dict(dead_letter_reasons(sqs, r.dead_letter_url)) for r in receivers}
    report = publish_messages(sns, topic_arn, plan.messages, subject=SUBJECT, concurrency=4)
    if report.failed:
        raise SendFailed(f"{len(report.failed)} messages could not be published to {topic}")
    valid = [
        (report.message_ids[str(index)], message)
        for index, message in enumerate(plan.messages)
        if message.body not in plan.poison_bodies
    ]
    again = rng.sample(valid, min(workload.redeliveries, len(valid)))
    for message_id, message in again:
        redeliver(sqs, topic_arn, message_id, message, [r.delivery_url for r in receivers])
    return SentTopicWorkload(
        run_id=run_id,
        topic=topic,
        topic_arn=topic_arn,
        published=report.sent,
        duplicates=plan.duplicates,
        redelivered=len(again),
        poison=plan.poison,
        expected_keys=sorted(plan.keys),
        receivers=receivers,
        dead_letters_before=before,
        throughput=report.throughput,
        sent_at=utc_now(),
    )
