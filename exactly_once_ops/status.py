"""A stack's consumers and topic subscribers at a glance: queue and DLQ depths, and pending
idempotency records.

Works on any stack built from the constructs: the queues come from its outputs, the pending
records from the store (`Store.list_pending`: the table's sparse index, no Scan, or PostgreSQL's
partial index), attributed to a consumer or subscriber by the
idempotency scope its function runs with (`CONSUMER_SCOPE` / `SUBSCRIBER_SCOPE`; the
construct's default when unreadable).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from exactly_once import Status
from exactly_once_cdk.outputs import DEAD_LETTER_QUEUE_URL, FUNCTION_NAME, QUEUE_URL
from exactly_once_ops.targets import consumers_in, subscribers_in

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from exactly_once.stores.protocol import Store

PENDING_CAP = 1000
"""Records counted per status at most; beyond that the count shows as a lower bound."""


@dataclass(frozen=True)
class QueueDepth:
    visible: int
    in_flight: int  # received and not yet deleted (ApproximateNumberOfMessagesNotVisible)
    delayed: int

    @property
    def total(self) -> int:
        return self.visible + self.in_flight + self.delayed


@dataclass(frozen=True)
class ConsumerStatus:
    consumer: str  # as `--consumer` takes it: orders
    scope: str
    queue: QueueDepth
    dead_letters: QueueDepth
    in_progress: int
    failed: int


@dataclass(frozen=True)
class SubscriberStatus:
    subscriber: str  # as `invoke` takes it: salescounter
    scope: str
    dead_letters: QueueDepth
    in_progress: int
    failed: int


@dataclass(frozen=True)
class StackStatus:
    consumers: list[ConsumerStatus]
    pending_capped: bool  # more records than PENDING_CAP of some status: counts are minimums
    subscribers: list[SubscriberStatus] = field(default_factory=list)


def queue_depth(sqs: SQSClient, queue_url: str) -> QueueDepth:
    attrs = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    )["Attributes"]
    return QueueDepth(
        visible=int(attrs.get("ApproximateNumberOfMessages", 0)),
        in_flight=int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
        delayed=int(attrs.get("ApproximateNumberOfMessagesDelayed", 0)),
    )


def consumer_scope(
    lambda_client: Any, function_name: str | None, consumer: str, variable: str = "CONSUMER_SCOPE"
) -> str:
    """The function's CONSUMER_SCOPE (a subscriber's SUBSCRIBER_SCOPE); the construct's default
    (its id, lower case) otherwise."""
    if function_name:
        try:
            config = lambda_client.get_function_configuration(FunctionName=function_name)
            scope = config.get("Environment", {}).get("Variables", {}).get(variable)
            if scope:
                return str(scope)
        except (ClientError, BotoCoreError):
            pass  # e.g. no lambda:GetFunctionConfiguration permission
    return consumer.lower()


def pending_by_scope(store: Store) -> tuple[Counter[tuple[str, Status]], bool]:
    """(scope, status) -> record count, and whether a status hit PENDING_CAP."""
    counts: Counter[tuple[str, Status]] = Counter()
    capped = False
    for status in (Status.IN_PROGRESS, Status.FAILED):
        seen = 0
        for record in store.list_pending(status, limit=PENDING_CAP):
            counts[(record.record_id.split("#", 1)[0], status)] += 1
            seen += 1
        capped = capped or seen >= PENDING_CAP
    return counts, capped


def stack_status(
    sqs: SQSClient, lambda_client: Any, store: Store, outputs: dict[str, str]
) -> StackStatus:
    pending, capped = pending_by_scope(store)
    found = []
    for name in consumers_in(outputs):
        scope = consumer_scope(lambda_client, outputs.get(f"{name}{FUNCTION_NAME}"), name)
        dlq = outputs.get(f"{name}{DEAD_LETTER_QUEUE_URL}")
        found.append(
            ConsumerStatus(
                consumer=name.lower(),
                scope=scope,
                queue=queue_depth(sqs, outputs[f"{name}{QUEUE_URL}"]),
                dead_letters=queue_depth(sqs, dlq) if dlq else QueueDepth(0, 0, 0),
                in_progress=pending[(scope, Status.IN_PROGRESS)],
                failed=pending[(scope, Status.FAILED)],
            )
        )
    subscribers = []
    for name in subscribers_in(outputs):
        function = outputs.get(f"{name}{FUNCTION_NAME}")
        scope = consumer_scope(lambda_client, function, name, "SUBSCRIBER_SCOPE")
        subscribers.append(
            SubscriberStatus(
                subscriber=name.lower(),
                scope=scope,
                dead_letters=queue_depth(sqs, outputs[f"{name}{DEAD_LETTER_QUEUE_URL}"]),
                in_progress=pending[(scope, Status.IN_PROGRESS)],
                failed=pending[(scope, Status.FAILED)],
            )
        )
    return StackStatus(found, capped, subscribers)
