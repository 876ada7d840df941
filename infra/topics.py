"""The registry of SNS topics: one entry per topic, with its queue and direct subscribers.

Plain data, no CDK imports: the stack builds one `IdempotentTopic` per entry (and an
`IdempotentSubscriber` per direct subscriber). The local stack never reads it: it learns the
topics and subscribers from the deployed template (exactly_once_ops/app_template.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SubscriberSpec:
    """A Lambda function subscribed directly to a topic (SNS invokes it asynchronously).

    `block_expired_leases`: an IN_PROGRESS record whose lease expired is marked FAILED for a
    person instead of being taken over. `retry_attempts`: Lambda's asynchronous retries (0-2)
    before the event goes to the subscriber's DLQ.
    """

    id: str  # construct id and output prefix, e.g. "SalesCounter"
    scope: str  # idempotency scope (SUBSCRIBER_SCOPE): the first half of every record id
    source_dir: str  # relative to the repository root
    handler: str = "handler.handle"
    block_expired_leases: bool = False
    description: str = ""
    timeout_seconds: int | None = None
    memory_mb: int | None = None
    retry_attempts: int = 2

    @property
    def source_path(self) -> Path:
        return ROOT / self.source_dir


@dataclass(frozen=True)
class TopicSpec:
    """A topic. `queues` are consumer ids (infra/consumers.py) whose queues subscribe to it;
    `raw_delivery` sends them the message alone, with SNS attributes as SQS attributes, instead
    of the SNS envelope."""

    id: str  # construct id and output prefix: `<Id>TopicArn`
    queues: tuple[str, ...] = ()
    subscribers: tuple[SubscriberSpec, ...] = ()
    raw_delivery: bool = False
    description: str = ""


TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(
        id="Sales",
        queues=("Orders",),
        subscribers=(
            SubscriberSpec(
                id="SalesCounter",
                scope="sales",
                source_dir="functions/sales",
                description="Counts each sale once, subscribed directly to the Sales topic",
            ),
        ),
        description="Sales events: fanned out to the orders queue and the sales counter",
    ),
)


def by_id(topic_id: str) -> TopicSpec:
    for spec in TOPICS:
        if spec.id == topic_id:
            return spec
    raise KeyError(f"no topic {topic_id!r}; known: {[s.id for s in TOPICS]}")


def subscriber_by_id(subscriber_id: str) -> SubscriberSpec:
    for topic in TOPICS:
        for spec in topic.subscribers:
            if spec.id == subscriber_id:
                return spec
    known = [s.id for t in TOPICS for s in t.subscribers]
    raise KeyError(f"no subscriber {subscriber_id!r}; known: {known}")
