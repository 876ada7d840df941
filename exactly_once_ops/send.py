"""Send messages to a queue with SendMessageBatch, in parallel, and account for every entry.

`send_messages` is the core that `make run`'s demo workload and the chaos harness call directly;
the `send` command is a thin CLI around it. SendMessageBatch can succeed as a call yet fail
single entries, so each entry's outcome is read from `Successful`/`Failed`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import (
        MessageAttributeValueTypeDef,
        SendMessageBatchRequestEntryTypeDef,
    )

BATCH_SIZE = 10
"""SendMessageBatch's limit."""


@dataclass(frozen=True)
class OutgoingMessage:
    """One message to send; group/dedup ids only matter for FIFO queues."""

    body: str
    attributes: Mapping[str, MessageAttributeValueTypeDef] = field(default_factory=dict)
    group_id: str | None = None
    dedup_id: str | None = None
    trace_header: str | None = None


@dataclass(frozen=True)
class EntryFailure:
    """A batch entry SQS did not accept, as reported in the response's `Failed` list."""

    id: str
    code: str
    message: str
    sender_fault: bool


@dataclass
class SendReport:
    """What happened to every message of a `send_messages` call."""

    message_ids: dict[str, str] = field(default_factory=dict)
    """Entry id (the message's index in the input) -> SQS MessageId, for sent entries."""
    failed: list[EntryFailure] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def sent(self) -> int:
        return len(self.message_ids)

    @property
    def throughput(self) -> float:
        """Messages accepted per second of wall time."""
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


def batch_entry(entry_id: str, message: OutgoingMessage) -> SendMessageBatchRequestEntryTypeDef:
    """The SendMessageBatch entry for a message, leaving out every field it doesn't set."""
    entry: SendMessageBatchRequestEntryTypeDef = {"Id": entry_id, "MessageBody": message.body}
    if message.attributes:
        entry["MessageAttributes"] = dict(message.attributes)
    if message.group_id is not None:
        entry["MessageGroupId"] = message.group_id
    if message.dedup_id is not None:
        entry["MessageDeduplicationId"] = message.dedup_id
    if message.trace_header is not None:
        entry["MessageSystemAttributes"] = {
            "AWSTraceHeader": {"DataType": "String", "StringValue": message.trace_header}
        }
    return entry


def send_batch(
    sqs: SQSClient, queue_url: str, batch: Sequence[tuple[str, OutgoingMessage]]
) -> tuple[dict[str, str], list[EntryFailure]]:
    """One SendMessageBatch call: (entry id -> MessageId for sent ones, failures), as
    `batch_outcome` reads it."""
    entries = [batch_entry(entry_id, message) for entry_id, message in batch]
    return batch_outcome(lambda: sqs.send_message_batch(QueueUrl=queue_url, Entries=entries), batch)


def batch_outcome(
    call: Callable[[], Mapping[str, Any]], batch: Sequence[tuple[str, OutgoingMessage]]
) -> tuple[dict[str, str], list[EntryFailure]]:
    """Make one batch call (SendMessageBatch, PublishBatch) and read each entry's outcome from
    its `Successful`/`Failed` lists: (entry id -> MessageId for accepted ones, failures).

    A rejected request (e.g. the batch is too large) fails all of its entries rather than the
    whole run, so the report still says which messages did not go out. Connection errors are
    not caught: they mean nothing will get through.
    """
    try:
        response = call()
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "ClientError")
        text = error.get("Message", str(exc))
        return {}, [EntryFailure(entry_id, code, text, True) for entry_id, _ in batch]
    accepted = {ok["Id"]: ok["MessageId"] for ok in response.get("Successful", [])}
    failed = [
        EntryFailure(bad["Id"], bad["Code"], bad.get("Message", ""), bad["SenderFault"])
        for bad in response.get("Failed", [])
    ]
    return accepted, failed


def chunks(
    messages: Sequence[OutgoingMessage], size: int = BATCH_SIZE
) -> list[list[tuple[str, OutgoingMessage]]]:
    """Batches of (entry id, message); the entry id is the message's index in the input."""
    numbered = [(str(index), message) for index, message in enumerate(messages)]
    return [numbered[start : start + size] for start in range(0, len(numbered), size)]


class SendInterrupted(KeyboardInterrupt):
    """Ctrl-C during `send_messages`, with the report of what was sent until then.

    A KeyboardInterrupt still, so callers that only know that one stop as before.
    """

    def __init__(self, report: SendReport) -> None:
        super().__init__(f"interrupted after {report.sent} message(s) sent")
        self.report = report


BatchSender = Callable[
    [Sequence[tuple[str, OutgoingMessage]]], tuple[dict[str, str], list[EntryFailure]]
]
"""One batch call (entry id, message) -> (entry id -> MessageId for sent ones, failures)."""


def send_messages(
    sqs: SQSClient,
    queue_url: str,
    messages: Sequence[OutgoingMessage],
    *,
    concurrency: int = 4,
    on_batch: Callable[[int], None] | None = None,
) -> SendReport:
    """Send all messages in batches of 10 on `concurrency` threads (boto3 clients are thread-safe).

    `on_batch(n)` is called after each batch with its size, e.g. to advance a progress bar.
    On Ctrl-C no new batch starts, the ones in flight finish, and `SendInterrupted` carries
    the report of everything sent; an error (e.g. no connection) cancels the batches not
    started and propagates.
    """
    return run_batches(
        lambda batch: send_batch(sqs, queue_url, batch),
        messages,
        concurrency=concurrency,
        on_batch=on_batch,
    )


def run_batches(
    send: BatchSender,
    messages: Sequence[OutgoingMessage],
    *,
    concurrency: int = 4,
    on_batch: Callable[[int], None] | None = None,
) -> SendReport:
    """`send` every batch of 10 on `concurrency` threads; what `send_messages` and
    `publish_messages` share (see `send_messages` for Ctrl-C and errors)."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    started = time.perf_counter()

    def run(batch: list[tuple[str, OutgoingMessage]]) -> tuple[dict[str, str], list[EntryFailure]]:
        outcome = send(batch)
        if on_batch is not None:
            on_batch(len(batch))
        return outcome

    pool = ThreadPoolExecutor(max_workers=concurrency)
    futures = [pool.submit(run, batch) for batch in chunks(messages)]
    try:
        for future in as_completed(futures):
            future.result()
    except KeyboardInterrupt:
        pool.shutdown(wait=True, cancel_futures=True)
        raise SendInterrupted(_report(futures, started)) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return _report(futures, started)


def _report(
    futures: Sequence[Future[tuple[dict[str, str], list[EntryFailure]]]], started: float
) -> SendReport:
    """What the finished batches sent and failed (cancelled ones sent nothing)."""
    report = SendReport(elapsed_s=time.perf_counter() - started)
    for future in futures:
        if future.done() and not future.cancelled() and future.exception() is None:
            sent, failed = future.result()
            report.message_ids.update(sent)
            report.failed.extend(failed)
    report.failed.sort(key=lambda failure: int(failure.id) if failure.id.isdigit() else -1)
    return report


def sent_lines(report: SendReport, messages: Sequence[OutgoingMessage]) -> Iterator[str]:
    """`send --ids-out`: a JSON object per sent message, in input order: index, MessageId, body.

    The body ties SQS's id to the business id, which is what `locks show` and replay filters use.
    """
    for entry_id in sorted(report.message_ids, key=int):
        index = int(entry_id)
        message_id = report.message_ids[entry_id]
        yield json.dumps({"index": index, "messageId": message_id, "body": messages[index].body})
