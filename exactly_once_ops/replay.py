"""Copy-mode replay: move messages from a dead-letter queue back to their source queue.

Unlike SQS's own message-move task, this can filter (body text, attributes, the layer's
`eo-error-type`), preview, keep a backup and copy without deleting. A message is deleted from
the DLQ only after SendMessageBatch confirmed that very entry, so a partial batch failure can
never lose a message. Replayed messages get new SQS messageIds: consumers recognise a replay
by its business id, not by the messageId. Attributes are copied unchanged (never more than the
ten the message had): the layer's `eo-replay-nonce` is what lets a permanent failure run again,
and `eo-failure` carries any originals that did not fit beside the layer's own.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from exactly_once_ops.message_attributes import error_type, for_send, scalar, to_json, unpacked
from exactly_once_ops.send import EntryFailure, OutgoingMessage, send_batch

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

MAX_BATCH = 10
STALE_POLLS_BEFORE_STOP = 3
"""Receives in a row that return only already-seen messages before the run ends."""


@dataclass(frozen=True)
class MessageFilter:
    """Which DLQ messages to replay; every given criterion must match."""

    body: str | None = None
    regex: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)
    error_types: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.regex and self.body is not None:
            re.compile(self.body)  # fail on a bad pattern before touching the queue

    def matches(self, message: MessageTypeDef) -> bool:
        body = message.get("Body", "")
        if self.body is not None:
            found = re.search(self.body, body) if self.regex else self.body in body
            if not found:
                return False
        received = message.get("MessageAttributes", {})
        originals = unpacked(received)  # the layer may have packed some into eo-failure
        for name, wanted in self.attributes.items():
            if name not in originals or scalar(originals[name]) != wanted:
                return False
        return not self.error_types or error_type(received) in self.error_types


@dataclass(frozen=True)
class CopyOptions:
    """How a copy-mode replay behaves; see the `replay copy` help for each option."""

    limit: int | None = None
    rate: float | None = None
    keep: bool = False
    dry_run: bool = False
    visibility_timeout: int = 60
    wait_seconds: int = 2
    keep_dedup_id: bool = False
    backup: Path | None = None


@dataclass(frozen=True)
class ReplayFailure:
    """A message that could not be replayed (stage `send`) or was sent but not deleted."""

    message_id: str
    stage: str
    code: str
    message: str


@dataclass
class CopyReport:
    moved: list[str] = field(default_factory=list)
    """Original messageIds that were sent to the destination (and deleted, unless kept)."""
    deleted: int = 0
    skipped: int = 0
    failures: list[ReplayFailure] = field(default_factory=list)
    previews: list[dict[str, Any]] = field(default_factory=list)
    """Dry run: what would have moved."""
    release_failures: int = 0


def replay_dedup_id(original: str) -> str:
    """A dedup id derived from the original one.

    Re-using the original id verbatim makes SQS silently drop the replay if the original send
    is less than 5 minutes old; deriving keeps a crashed-and-rerun replay idempotent instead.
    """
    return hashlib.sha256(f"replay:{original}".encode()).hexdigest()


def replay_message(
    message: MessageTypeDef, *, fifo_destination: bool, keep_dedup_id: bool = False
) -> OutgoingMessage:
    """The message to send: same body and attributes; for FIFO the group and a dedup id."""
    system = message.get("Attributes", {})
    group_id: str | None = None
    dedup_id: str | None = None
    if fifo_destination:
        group_id = system.get("MessageGroupId")
        original = system.get("MessageDeduplicationId") or message["MessageId"]
        dedup_id = original if keep_dedup_id else replay_dedup_id(original)
    return OutgoingMessage(
        body=message.get("Body", ""),
        attributes=for_send(message.get("MessageAttributes", {})),
        group_id=group_id,
        dedup_id=dedup_id,
        trace_header=system.get("AWSTraceHeader"),
    )


def backup_record(
    message: MessageTypeDef, outgoing: OutgoingMessage, *, new_message_id: str, source: str, to: str
) -> dict[str, Any]:
    """One JSON line of the backup file: enough to re-send the message by hand."""
    system = message.get("Attributes", {})
    return {
        "time": datetime.now(UTC).isoformat(),
        "originalMessageId": message["MessageId"],
        "newMessageId": new_message_id,
        "sourceQueueUrl": source,
        "destinationQueueUrl": to,
        "body": message.get("Body", ""),
        "messageAttributes": to_json(message.get("MessageAttributes", {})),
        "messageGroupId": system.get("MessageGroupId"),
        "messageDeduplicationId": system.get("MessageDeduplicationId"),
        "replayDeduplicationId": outgoing.dedup_id,
    }


def preview(message: MessageTypeDef) -> dict[str, Any]:
    """What a dry run shows about a message that would move."""
    attributes = message.get("MessageAttributes", {})
    return {
        "messageId": message["MessageId"],
        "groupId": message.get("Attributes", {}).get("MessageGroupId"),
        "errorType": error_type(attributes),
        "attributes": sorted(attributes),
        "body": message.get("Body", ""),
    }


class Pacer:
    """Spaces sends so the average stays at or under `rate` messages per second.

    Hand-written because it is a few lines and a dependency would be heavier than the need.
    """

    def __init__(self, rate: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("--rate must be positive")
        self.rate = rate
        self.clock = clock
        self.started = clock()
        self.sent = 0

    def wait(self, count: int, sleep: Callable[[float], None] = time.sleep) -> None:
        """Block until `count` more messages may go, then count them as sent."""
        if self.rate is not None:
            delay = self.started + self.sent / self.rate - self.clock()
            if delay > 0:
                sleep(delay)
        self.sent += count


class _Held:
    """Receipt handles of messages kept invisible until the run ends, then released."""

    def __init__(self) -> None:
        self.handles: dict[str, str] = {}

    def hold(self, message: MessageTypeDef) -> None:
        self.handles[message["MessageId"]] = message["ReceiptHandle"]

    def refresh(self, message: MessageTypeDef) -> None:
        """A held message came back (its visibility ran out): only the newest handle works."""
        if message["MessageId"] in self.handles:
            self.hold(message)

    def release(self, sqs: SQSClient, queue_url: str) -> int:
        """Make every held message visible again; returns how many could not be released."""
        items = list(self.handles.items())
        failed = 0
        for start in range(0, len(items), MAX_BATCH):
            chunk = items[start : start + MAX_BATCH]
            response = sqs.change_message_visibility_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                    for i, (_, handle) in enumerate(chunk)
                ],
            )
            failed += len(response.get("Failed", []))
        self.handles.clear()
        return failed


class CopyReplay:
    """One copy-mode run from `dlq_url` to `destination_url`."""

    def __init__(
        self,
        sqs: SQSClient,
        dlq_url: str,
        destination_url: str,
        *,
        message_filter: MessageFilter,
        options: CopyOptions,
        fifo_destination: bool,
        on_progress: Callable[[CopyReport], None] | None = None,
    ) -> None:
        self.sqs = sqs
        self.dlq_url = dlq_url
        self.destination_url = destination_url
        self.filter = message_filter
        self.options = options
        self.fifo_destination = fifo_destination
        self.on_progress = on_progress
        self.report = CopyReport()
        self.pacer = Pacer(options.rate)
        self._held = _Held()
        self._seen: set[str] = set()
        self._matched = 0

    def run(self) -> CopyReport:
        """Receive, filter, send and delete until the DLQ has nothing new or the limit is hit."""
        stale_polls = 0
        try:
            while not self._limit_reached():
                messages = self._receive()
                if not messages:
                    break
                fresh = [m for m in messages if m["MessageId"] not in self._seen]
                for message in messages:
                    self._held.refresh(message)
                if not fresh:
                    stale_polls += 1
                    if stale_polls >= STALE_POLLS_BEFORE_STOP:
                        break
                    continue
                stale_polls = 0
                self._seen.update(m["MessageId"] for m in fresh)
                self._handle(fresh)
                if self.on_progress is not None:
                    self.on_progress(self.report)
        finally:
            self.report.release_failures += self._held.release(self.sqs, self.dlq_url)
        return self.report

    def _limit_reached(self) -> bool:
        return self.options.limit is not None and self._matched >= self.options.limit

    def _receive(self) -> list[MessageTypeDef]:
        wanted = MAX_BATCH
        if self.options.limit is not None:
            wanted = max(1, min(MAX_BATCH, self.options.limit - self._matched))
        response = self.sqs.receive_message(
            QueueUrl=self.dlq_url,
            MaxNumberOfMessages=wanted,
            WaitTimeSeconds=self.options.wait_seconds,
            VisibilityTimeout=self.options.visibility_timeout,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )
        return response.get("Messages", [])

    def _handle(self, messages: list[MessageTypeDef]) -> None:
        matched: list[MessageTypeDef] = []
        for message in messages:
            if self._limit_reached():  # beyond --limit: untouched, released at the end
                self._held.hold(message)
                continue
            if not self.filter.matches(message):
                self.report.skipped += 1
                self._held.hold(message)
                continue
            matched.append(message)
            self._matched += 1
        if not matched:
            return
        if self.options.dry_run:
            for message in matched:
                self.report.previews.append(preview(message))
                self._held.hold(message)
            return
        self._move(matched)

    def _move(self, matched: list[MessageTypeDef]) -> None:
        outgoing = [
            replay_message(
                m,
                fifo_destination=self.fifo_destination,
                keep_dedup_id=self.options.keep_dedup_id,
            )
            for m in matched
        ]
        self.pacer.wait(len(matched))
        batch = [(str(i), message) for i, message in enumerate(outgoing)]
        sent, failed = send_batch(self.sqs, self.destination_url, batch)
        self._record_failures(matched, failed, stage="send")
        to_delete: list[tuple[str, MessageTypeDef]] = []
        for entry_id, new_message_id in sent.items():
            original = matched[int(entry_id)]
            self.report.moved.append(original["MessageId"])
            self._backup(original, outgoing[int(entry_id)], new_message_id)
            if self.options.keep:
                self._held.hold(original)
            else:
                to_delete.append((entry_id, original))
        for failure in failed:
            self._held.hold(matched[int(failure.id)])
        self._delete(to_delete)

    def _delete(self, entries: list[tuple[str, MessageTypeDef]]) -> None:
        """Delete confirmed sends; a failed delete means the message will be replayed again."""
        if not entries:
            return
        by_id = dict(entries)
        try:
            response = self.sqs.delete_message_batch(
                QueueUrl=self.dlq_url,
                Entries=[{"Id": i, "ReceiptHandle": m["ReceiptHandle"]} for i, m in entries],
            )
        except ClientError as exc:  # the sends happened: report them rather than abort
            error = exc.response.get("Error", {})
            failed = [
                {"Id": i, "Code": error.get("Code", "ClientError"), "Message": str(exc)}
                for i, _ in entries
            ]
        else:
            self.report.deleted += len(response.get("Successful", []))
            failed = [
                {"Id": bad["Id"], "Code": bad["Code"], "Message": bad.get("Message", "")}
                for bad in response.get("Failed", [])
            ]
        for bad in failed:
            self._held.hold(by_id[bad["Id"]])  # visible again at the end, like every leftover
            self.report.failures.append(
                ReplayFailure(
                    by_id[bad["Id"]]["MessageId"],
                    "delete",
                    bad["Code"],
                    "sent to the destination but still in the DLQ: " + bad["Message"],
                )
            )

    def _record_failures(
        self, matched: list[MessageTypeDef], failed: list[EntryFailure], *, stage: str
    ) -> None:
        for failure in failed:
            self.report.failures.append(
                ReplayFailure(
                    matched[int(failure.id)]["MessageId"], stage, failure.code, failure.message
                )
            )

    def _backup(self, original: MessageTypeDef, outgoing: OutgoingMessage, new_id: str) -> None:
        if self.options.backup is None:
            return
        record = backup_record(
            original,
            outgoing,
            new_message_id=new_id,
            source=self.dlq_url,
            to=self.destination_url,
        )
        with self.options.backup.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
