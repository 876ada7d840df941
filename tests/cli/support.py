"""Helpers shared by the CLI tests: queue pairs, draining, counting, failure injection."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from typer.testing import Result

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType
    from mypy_boto3_sqs.type_defs import MessageTypeDef

REGION = "us-east-1"
EntryPredicate = Callable[[dict[str, Any]], bool]
Invoke = Callable[..., Result]
"""The `cli` fixture: run the CLI with these arguments."""


@dataclass(frozen=True)
class QueuePair:
    source: str
    dlq: str


def make_pair(
    sqs: SQSClient, name: str, *, fifo: bool = False, content_based: bool = False
) -> QueuePair:
    """A source queue whose redrive policy points at its own DLQ."""
    suffix = ".fifo" if fifo else ""
    base: dict[QueueAttributeNameType, str] = {"FifoQueue": "true"} if fifo else {}
    if content_based:
        base["ContentBasedDeduplication"] = "true"
    dlq = sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes=base)["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    source_attrs = dict(base)
    source_attrs["RedrivePolicy"] = json.dumps(
        {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"}
    )
    source = sqs.create_queue(QueueName=f"{name}{suffix}", Attributes=source_attrs)["QueueUrl"]
    return QueuePair(source, dlq)


def drain(sqs: SQSClient, queue_url: str) -> list[MessageTypeDef]:
    """Receive and delete every visible message (deleting unblocks FIFO groups)."""
    out: list[MessageTypeDef] = []
    while True:
        batch = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=300,
            WaitTimeSeconds=0,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        if not batch:
            return out
        out.extend(batch)
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(batch)
            ],
        )


def counts(sqs: SQSClient, queue_url: str) -> tuple[int, int]:
    """(visible, in flight) messages of a queue."""
    attrs = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(attrs["ApproximateNumberOfMessages"]),
        int(attrs["ApproximateNumberOfMessagesNotVisible"]),
    )


def inject_failures(
    client: SQSClient, operation: str, predicate: EntryPredicate, code: str = "InternalError"
) -> None:
    """Make a batch call fail the entries `predicate` selects, like SQS's own `Failed` list.

    The entries are removed from the request (so they really are not sent/deleted) and added
    to the response's `Failed`; the per-call context keeps threads apart.
    """

    def drop(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        entries = params["Entries"]
        context["injected"] = [entry["Id"] for entry in entries if predicate(entry)]
        params["Entries"] = [entry for entry in entries if not predicate(entry)]

    def report(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        failed = parsed.setdefault("Failed", [])
        for entry_id in context.get("injected", []):
            failed.append(
                {"Id": entry_id, "SenderFault": False, "Code": code, "Message": "injected"}
            )

    client.meta.events.register(f"before-parameter-build.sqs.{operation}", drop)
    client.meta.events.register(f"after-call.sqs.{operation}", report)


InvokeWith = Callable[[str, str], Result]
"""`eonce invoke NAME --event FILE` against the test's tables (the `invoke` fixture)."""
