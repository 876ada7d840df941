"""Send the planned messages while the workers run, keeping the queue's backlog bounded.

A steady flow is closer to production than one burst, and it keeps moto fast: its receive and
delete scan every message in the queue, so a 10,000-message backlog would make each call slow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from exactly_once_ops.send import OutgoingMessage, send_messages
from fault_injection.workload import PlannedMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

CHUNK = 50


def visible(sqs: SQSClient, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes.get("ApproximateNumberOfMessages", "0"))


def feed(
    sqs: SQSClient,
    queue_url: str,
    messages: list[PlannedMessage],
    backlog: int,
    on_sent: Callable[[int], None] | None = None,
    check: Callable[[], None] = lambda: None,
) -> dict[int, str]:
    """Send everything; returns the SQS MessageId of each planned message, by its index.

    `check` runs while waiting for the backlog to shrink and may raise to abort.
    """
    ids: dict[int, str] = {}
    for start in range(0, len(messages), CHUNK):
        while visible(sqs, queue_url) >= backlog:
            check()
            time.sleep(0.2)
        chunk = messages[start : start + CHUNK]
        report = send_messages(
            sqs, queue_url, [OutgoingMessage(body=m.body) for m in chunk], concurrency=2
        )
        if report.failed:
            first = report.failed[0]
            raise RuntimeError(f"{len(report.failed)} sends failed, e.g. {first.code}")
        ids.update({start + int(entry): mid for entry, mid in report.message_ids.items()})
        if on_sent is not None:
            on_sent(len(ids))
    return ids
