"""Publish messages to an SNS topic with PublishBatch, in parallel, accounting for every entry.

The topic counterpart of send.py: `make run`'s topic workload and the `publish` command call
`publish_messages`. Like SendMessageBatch, PublishBatch can succeed as a call yet fail single
entries, so each entry's outcome is read from `Successful`/`Failed`, and the report has the
same shape as `send`'s (entry id = the message's index -> SNS MessageId).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from exactly_once_ops.send import (
    EntryFailure,
    OutgoingMessage,
    SendReport,
    batch_outcome,
    run_batches,
)


def is_fifo_topic(topic_arn: str) -> bool:
    """FIFO topic names end in `.fifo`, so the ARN alone tells."""
    return topic_arn.endswith(".fifo")


def publish_entry(entry_id: str, message: OutgoingMessage, subject: str | None) -> dict[str, Any]:
    """The PublishBatch entry for a message, leaving out every field it doesn't set."""
    entry: dict[str, Any] = {"Id": entry_id, "Message": message.body}
    if subject:
        entry["Subject"] = subject
    if message.attributes:
        entry["MessageAttributes"] = dict(message.attributes)
    if message.group_id is not None:
        entry["MessageGroupId"] = message.group_id
    if message.dedup_id is not None:
        entry["MessageDeduplicationId"] = message.dedup_id
    return entry


def publish_batch(
    sns: Any,
    topic_arn: str,
    batch: Sequence[tuple[str, OutgoingMessage]],
    subject: str | None = None,
) -> tuple[dict[str, str], list[EntryFailure]]:
    """One PublishBatch call: (entry id -> MessageId for published ones, failures), as
    `batch_outcome` reads it (a rejected request fails all of its entries)."""
    entries = [publish_entry(entry_id, message, subject) for entry_id, message in batch]
    return batch_outcome(
        lambda: sns.publish_batch(TopicArn=topic_arn, PublishBatchRequestEntries=entries), batch
    )


def publish_messages(
    sns: Any,
    topic_arn: str,
    messages: Sequence[OutgoingMessage],
    *,
    subject: str | None = None,
    concurrency: int = 4,
    on_batch: Callable[[int], None] | None = None,
) -> SendReport:
    """Publish all messages in batches of 10 on `concurrency` threads; Ctrl-C and errors as in
    `send_messages` (a `SendInterrupted` carries what was published)."""
    return run_batches(
        lambda batch: publish_batch(sns, topic_arn, batch, subject),
        messages,
        concurrency=concurrency,
        on_batch=on_batch,
    )
