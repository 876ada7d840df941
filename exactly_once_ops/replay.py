"""Copy-mode replay: move messages from a dead-letter queue back to their source queue.

Unlike SQS's own message-move task, this can filter (body text, attributes, the layer's
`eo-error-type`), preview, keep a backup and copy without deleting. A message is deleted from
the DLQ only after SendMessageBatch confirmed that very entry, so a partial batch failure can
never lose a message. Replayed messages get new SQS messageIds: consumers recognise a replay
by its business id, not by the messageId. Attributes are copied unchanged (never more than the
ten the message had): the layer's `eo-replay-nonce` is what lets a permanent failure run again,
and `eo-failure` carries any originals that did not fit beside the layer's own.

FIFO: SQS returns no later message of a group while an earlier one is in flight, and at most 10
of a group at once. Messages that stay in the DLQ (not matching, failed, a dry run, `keep`) are
held in flight during the run, so after the first sweep each group whose head stays is released
on its own and received again until its head stops moving; a head of 10 messages that all stay
hides the rest of the group, which the report says (`blocked_groups`, `unexamined`).

Reading the DLQ (`DeadLetterReader`: receive, hold, delete only what was replayed, release the
rest) and the run around it (`DeadLetterReplay`) are shared with the topic subscriber's replay
(subscriber_replay.py), which invokes a function where this module sends to a queue.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from exactly_once_ops.message_attributes import (
    ORIGINAL_ID_ATTRIBUTE,
    error_message,
    error_type,
    for_send,
    layer_attribute,
    scalar,
    to_json,
    unpacked,
)
from exactly_once_ops.send import EntryFailure, OutgoingMessage, send_batch
from exactly_once_ops.targets import is_fifo

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeFilterType
    from mypy_boto3_sqs.type_defs import MessageTypeDef

MAX_BATCH = 10
"""SQS's limit per receive, send and delete, and so the most of a FIFO group one receive shows."""
STALE_POLLS_BEFORE_STOP = 3
"""Receives in a row that return only already-seen messages before the sweep ends."""
SHORT_POLL_EMPTY_RECEIVES = 3
"""Without a long poll SQS samples only some of its servers, so one empty receive proves little."""
DEPTH_ATTRIBUTES: tuple[QueueAttributeFilterType, ...] = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


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

    @property
    def matches_all(self) -> bool:
        return self.body is None and not self.attributes and not self.error_types

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
class SweepOptions:
    """What every replay out of a DLQ takes: how many, how fast, how long to hold a message."""

    limit: int | None = None
    dry_run: bool = False
    rate: float | None = None
    visibility_timeout: int = 60
    wait_seconds: int = 2


@dataclass(frozen=True)
class CopyOptions(SweepOptions):
    """How a copy-mode replay behaves; see the `replay copy` help for each option."""

    keep: bool = False
    keep_dedup_id: bool = False


@dataclass(frozen=True)
class ReplayFailure:
    """A message that could not be replayed (stage `send`) or was sent but not deleted."""

    message_id: str
    stage: str
    code: str
    message: str


@dataclass
class DlqRunReport:
    """What any replay run out of a DLQ counts (see `DeadLetterReader`)."""

    deleted: int = 0
    skipped: int = 0
    """Messages the filter did not match."""
    failures: list[ReplayFailure] = field(default_factory=list)
    previews: list[dict[str, Any]] = field(default_factory=list)
    """Dry run: what would have been replayed."""
    release_failures: int = 0
    examined: int = 0
    """Distinct messages received and looked at."""
    returned: int = 0
    """Messages this run replayed that failed again and came back to the DLQ: left for later."""
    limit_reached: bool = False
    left_in_dlq: int | None = None
    """Messages in the DLQ when the run ended (SQS's approximate count; None if unreadable)."""
    unexamined: int | None = None
    """Of those, how many this run never received (None if the count was unreadable)."""


@dataclass
class CopyReport(DlqRunReport):
    moved: list[str] = field(default_factory=list)
    """Original messageIds that were sent to the destination (and deleted, unless kept)."""
    held_back: int = 0
    """FIFO: matching messages seen after a failed one of their group, left in the DLQ."""
    blocked_groups: list[str] = field(default_factory=list)
    """FIFO groups whose first 10 messages all stay in the DLQ, hiding any later ones."""
    stopped_groups: list[str] = field(default_factory=list)
    """FIFO groups with a failed send: the rest of each stays, so that nothing overtakes it."""

    @property
    def hidden(self) -> int | None:
        """Messages behind blocked or stopped groups, never examined (some may match).

        0 when no group was cut short (or --limit ended the run, as asked); None when some
        were but the DLQ's depth is unknown.
        """
        if self.limit_reached or not (self.blocked_groups or self.stopped_groups):
            return 0
        return self.unexamined


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
        "errorMessage": error_message(attributes),
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


def queue_depth(sqs: SQSClient, queue_url: str) -> int | None:
    """Visible, in-flight and delayed messages (approximate); None if SQS could not say.

    Used for progress and for the counts after a failure, so it must never raise itself.
    """
    try:
        attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(DEPTH_ATTRIBUTES))
    except (ClientError, BotoCoreError):
        return None
    found = attrs.get("Attributes", {})
    return sum(int(value) for name, value in found.items() if name in DEPTH_ATTRIBUTES)


class BackupFile:
    """The `--backup` JSONL file, opened for appending before anything is received.

    Opening first turns a bad path into an error while the DLQ is untouched; each line is
    flushed before its message is deleted from the DLQ, so a crash cannot lose both copies.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        try:
            self._file.write(json.dumps(record, sort_keys=True) + "\n")
            self._file.flush()
        except OSError as exc:  # name the file: a full disk says only "No space left"
            raise OSError(exc.errno, exc.strerror, str(self.path)) from exc

    def close(self) -> None:
        """Close; an error here concerns only a line whose write failed (the rest are flushed)."""
        with contextlib.suppress(OSError):
            self._file.close()


def _group(message: MessageTypeDef) -> str | None:
    return message.get("Attributes", {}).get("MessageGroupId")


class _Held:
    """Messages kept invisible during the run (their newest receipt handle), released later."""

    def __init__(self) -> None:
        self.messages: dict[str, MessageTypeDef] = {}

    def hold(self, message: MessageTypeDef) -> None:
        """Hold a message; a re-received one replaces its entry (only the newest handle works)."""
        self.messages[message["MessageId"]] = message

    def forget(self, message_id: str) -> None:
        """A deleted message: nothing to release."""
        self.messages.pop(message_id, None)

    def groups(self) -> list[str]:
        """FIFO groups with a held message, in the order they were first held."""
        return list(dict.fromkeys(g for g in map(_group, self.messages.values()) if g is not None))

    def release(self, sqs: SQSClient, queue_url: str, group: str | None = None) -> int:
        """Make held messages (all, or one group's) visible again; returns how many failed.

        Never raises: it also runs after an error or Ctrl-C, where the first error must show.
        """
        ids = [i for i, m in self.messages.items() if group is None or _group(m) == group]
        failed = 0
        for start in range(0, len(ids), MAX_BATCH):
            chunk = ids[start : start + MAX_BATCH]
            try:
                response = sqs.change_message_visibility_batch(
                    QueueUrl=queue_url,
                    Entries=[
                        {
                            "Id": str(i),
                            "ReceiptHandle": self.messages[message_id]["ReceiptHandle"],
                            "VisibilityTimeout": 0,
                        }
                        for i, message_id in enumerate(chunk)
                    ],
                )
            except (ClientError, BotoCoreError):
                failed += len(chunk)
            else:
                failed += len(response.get("Failed", []))
        for message_id in ids:
            del self.messages[message_id]
        return failed


class DeadLetterReader:
    """Reads a DLQ for a replay: receives, holds what it received invisible until it is
    deleted or released, and knows which messages it has already seen.

    Shared by copy mode and the subscriber replay: both delete a message only after its
    replay was confirmed, and release everything else when the run ends, however it ends.
    """

    def __init__(
        self, sqs: SQSClient, dlq_url: str, *, visibility_timeout: int, wait_seconds: int
    ) -> None:
        self.sqs = sqs
        self.dlq_url = dlq_url
        self.visibility_timeout = visibility_timeout
        self.wait_seconds = wait_seconds
        self.held = _Held()
        self.seen: set[str] = set()
        self.deleted: set[str] = set()

    def sweep(
        self,
        take: Callable[[list[MessageTypeDef]], list[MessageTypeDef]],
        batch_size: Callable[[], int],
    ) -> None:
        """Receive until SQS has nothing visible left to give, or `batch_size` says 0.

        `take` handles a receive and returns what was new in it.
        """
        empty_to_end = 1 if self.wait_seconds > 0 else SHORT_POLL_EMPTY_RECEIVES
        empty = stale = 0
        while (wanted := batch_size()) > 0:
            messages = self.receive(wanted)
            if not messages:
                empty += 1
                if empty >= empty_to_end:
                    return
                continue
            empty = 0
            if take(messages):
                stale = 0
            else:  # held messages whose visibility ran out: don't go round in circles
                stale += 1
                if stale >= STALE_POLLS_BEFORE_STOP:
                    return

    def receive(self, wanted: int) -> list[MessageTypeDef]:
        response = self.sqs.receive_message(
            QueueUrl=self.dlq_url,
            MaxNumberOfMessages=wanted,
            WaitTimeSeconds=self.wait_seconds,
            VisibilityTimeout=self.visibility_timeout,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        )
        return response.get("Messages", [])

    def fresh(self, messages: list[MessageTypeDef]) -> list[MessageTypeDef]:
        """Hold what was received; returns the messages not seen before (now seen).

        Every received message stays held until it is deleted, so whatever ends the run
        (an error, Ctrl-C) leaves nothing invisible behind.
        """
        for message in messages:
            self.held.hold(message)
        new = [m for m in messages if m["MessageId"] not in self.seen]
        self.seen.update(m["MessageId"] for m in new)
        return new

    def delete(self, messages: list[MessageTypeDef], done: str) -> tuple[int, list[ReplayFailure]]:
        """Delete replayed messages; (how many went, the failures). A failed delete leaves the
        message held (visible again at the end): it will be replayed again, which `done`
        (what already happened to it, e.g. "sent to the destination") tells the reader.
        """
        if not messages:
            return 0, []
        by_id = {str(i): message for i, message in enumerate(messages)}
        try:
            response = self.sqs.delete_message_batch(
                QueueUrl=self.dlq_url,
                Entries=[{"Id": i, "ReceiptHandle": self._receipt(m)} for i, m in by_id.items()],
            )
        except ClientError as exc:  # the replays happened: report them rather than abort
            error = exc.response.get("Error", {})
            failed = [
                {"Id": i, "Code": error.get("Code", "ClientError"), "Message": str(exc)}
                for i in by_id
            ]
            done_ids: list[str] = []
        else:
            done_ids = [ok["Id"] for ok in response.get("Successful", [])]
            failed = [
                {"Id": bad["Id"], "Code": bad["Code"], "Message": bad.get("Message", "")}
                for bad in response.get("Failed", [])
            ]
        for entry_id in done_ids:
            message_id = by_id[entry_id]["MessageId"]
            self.deleted.add(message_id)
            self.held.forget(message_id)
        failures = [
            ReplayFailure(
                by_id[bad["Id"]]["MessageId"],
                "delete",
                bad["Code"],
                f"{done} but still in the DLQ: {bad['Message']}",
            )
            for bad in failed
        ]
        return len(done_ids), failures

    def _receipt(self, message: MessageTypeDef) -> str:
        """The newest receipt handle: a slow run may have received the message again."""
        return self.held.messages.get(message["MessageId"], message)["ReceiptHandle"]

    def release(self, group: str | None = None) -> int:
        """Make held messages (all, or one FIFO group's) visible again; how many failed."""
        return self.held.release(self.sqs, self.dlq_url, group)

    def finish(self, report: DlqRunReport) -> None:
        """End a run: make every held message visible again, then count what is left.

        Never raises, so it can run after an error or Ctrl-C without hiding it.
        """
        report.release_failures += self.release()
        depth = queue_depth(self.sqs, self.dlq_url)
        report.left_in_dlq = depth
        if depth is not None:
            report.unexamined = max(0, depth - len(self.seen - self.deleted))


ReportT = TypeVar("ReportT", bound=DlqRunReport)


class DeadLetterReplay(ABC, Generic[ReportT]):
    """What every replay out of a DLQ does around its own `_handle`: sweep the DLQ once,
    hand each new message over, stop at `limit` matched, and end, however it ends, by
    releasing what stays and counting what is left."""

    def __init__(
        self, sqs: SQSClient, dlq_url: str, report: ReportT, options: SweepOptions
    ) -> None:
        self.sqs = sqs
        self.dlq_url = dlq_url
        self.report = report
        self.limit = options.limit
        self.pacer = Pacer(options.rate)
        self.reader = DeadLetterReader(
            sqs,
            dlq_url,
            visibility_timeout=options.visibility_timeout,
            wait_seconds=options.wait_seconds,
        )
        self.on_progress: Callable[[ReportT], None] | None = None
        self._matched = 0

    def run(self, on_progress: Callable[[ReportT], None] | None = None) -> ReportT:
        """Sweep the DLQ until it is exhausted or the limit is hit, then `_after_sweep`.

        Whatever happens (an error, Ctrl-C), every message not deleted is made visible again
        and `report.left_in_dlq` is filled in before the exception goes on.
        """
        self.on_progress = on_progress
        try:
            self.reader.sweep(self._take, self._batch_size)
            self._after_sweep()
        finally:
            self.report.limit_reached = self._limit_reached()
            self.reader.finish(self.report)
        return self.report

    def _after_sweep(self) -> None:
        """Nothing by default (copy mode reaches what hides behind FIFO group heads)."""

    def _batch_size(self) -> int:
        """How many messages to receive next: up to 10, and 0 once `limit` were matched."""
        if self.limit is None:
            return MAX_BATCH
        return max(0, min(MAX_BATCH, self.limit - self._matched))

    def _limit_reached(self) -> bool:
        return self._batch_size() == 0

    def _take(self, messages: list[MessageTypeDef]) -> list[MessageTypeDef]:
        """Hold what was received and handle what is new; returns the new messages."""
        fresh = self.reader.fresh(messages)
        if fresh:
            self.report.examined += len(fresh)
            self._handle(fresh)
            if self.on_progress is not None:
                self.on_progress(self.report)
        return fresh

    @abstractmethod
    def _handle(self, messages: list[MessageTypeDef]) -> None:
        """Replay (or preview, or skip) messages received for the first time."""


class CopyReplay(DeadLetterReplay[CopyReport]):
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
        backup: BackupFile | None = None,
    ) -> None:
        super().__init__(sqs, dlq_url, CopyReport(), options)
        self.destination_url = destination_url
        self.filter = message_filter
        self.options = options
        self.fifo_destination = fifo_destination
        self.backup = backup
        self._fifo_dlq = is_fifo(dlq_url)
        self._sent_ids: set[str] = set()

    def _after_sweep(self) -> None:
        if self._fifo_dlq:
            self._advance_groups()

    def _advance_groups(self) -> None:
        """FIFO: reach what sits behind the messages that stay at the head of each group.

        While any message of a group is held, SQS returns none of its later ones, so after the
        sweep every group with messages left is held at its head. Each is advanced on its own.
        """
        done: set[str] = set()
        while not self._limit_reached():
            pending = [g for g in self.reader.held.groups() if g not in done]
            if not pending:
                return
            done.add(pending[0])
            self._advance(pending[0])

    def _advance(self, group: str) -> None:
        """Release one group (every other stays held) and receive its head, up to 10 messages.

        Repeat while the head brings something new. A head of 10 messages that all stay is as
        far as SQS lets anyone look without deleting them; a group stopped by a failed send
        stays where it is.
        """
        while not self._limit_reached() and group not in self.report.stopped_groups:
            self.report.release_failures += self.reader.release(group)
            messages = self.reader.receive(MAX_BATCH)
            if not any(_group(m) == group for m in self._take(messages)):
                if sum(_group(m) == group for m in messages) >= MAX_BATCH:
                    self.report.blocked_groups.append(group)
                return

    def _handle(self, messages: list[MessageTypeDef]) -> None:
        matched: list[MessageTypeDef] = []
        for message in messages:
            if self._came_back(message):
                self.report.returned += 1
                continue
            if self._limit_reached():  # beyond --limit: untouched, released at the end
                continue
            if not self.filter.matches(message):
                self.report.skipped += 1
                continue
            if _group(message) in self.report.stopped_groups:
                self.report.held_back += 1
                continue
            matched.append(message)
            self._matched += 1
        if not matched:
            return
        if self.options.dry_run:
            self.report.previews.extend(preview(message) for message in matched)
            return
        self._move(matched)

    def _came_back(self, message: MessageTypeDef) -> bool:
        """A message this run sent, dead-lettered again while the consumers still poll.

        SQS's own redrive keeps the messageId; the layer's DLQ send names it in
        `eo-original-message-id`. Replaying it again in the same run would never end.
        """
        if message["MessageId"] in self._sent_ids:
            return True
        original = layer_attribute(message.get("MessageAttributes", {}), ORIGINAL_ID_ATTRIBUTE)
        return original is not None and original in self._sent_ids

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
        for failure in failed:
            group = _group(matched[int(failure.id)])
            if self._fifo_dlq and group is not None and group not in self.report.stopped_groups:
                self.report.stopped_groups.append(group)
        confirmed = sorted(((int(i), new_id) for i, new_id in sent.items()))
        self._sent_ids.update(new_id for _, new_id in confirmed)
        self.report.moved.extend(matched[i]["MessageId"] for i, _ in confirmed)
        backed_up: list[MessageTypeDef] = []
        try:
            for i, new_id in confirmed:
                self._backup(matched[i], outgoing[i], new_id)
                backed_up.append(matched[i])
        finally:
            # Only a message whose backup line is written may leave the DLQ; if a write
            # failed, the rest were sent but stay (a second replay of them is harmless).
            if not self.options.keep:
                deleted, failures = self.reader.delete(backed_up, "sent to the destination")
                self.report.deleted += deleted
                self.report.failures.extend(failures)

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
        if self.backup is None:
            return
        self.backup.write(
            backup_record(
                original,
                outgoing,
                new_message_id=new_id,
                source=self.dlq_url,
                to=self.destination_url,
            )
        )
