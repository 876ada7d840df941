"""Close the books after a run, from durable state only: the ledger, the DLQ, the tables.

Counters reported by workers cannot be trusted for this (a killed worker reports nothing), so
every invariant is read back from where the effects and the messages ended up:

* each planned business key was executed exactly once: every column writes the same
  append-only execution log (one entry per execution, `sk` = "{scope}#effect#<execution id>"),
  so the entries per key count executions, and a lock or fence that let a key run twice shows
  as a second entry (`--lock-off` proves it: the books then fail);
* every sent message was processed (its key took effect) or is in the DLQ with its reason;
* no idempotency record is left IN_PROGRESS past its lease, or FAILED-but-retryable, once
  nothing is in flight (either would be work that silently never finishes).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from exactly_once import IdempotencyStore, Status
from exactly_once.stores.protocol import Store
from fault_injection.consumers import Library
from fault_injection.workload import Plan

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

REDRIVEN = "redriven by SQS after maxReceiveCount (no reason attached)"
ZOMBIE = "a frozen (zombie) holder wrote its effect too"
KILLED = "holder killed between its effect and its completion"
OVERRUN = "lease ran out mid-record, or completion not recorded"


@dataclass(frozen=True)
class LedgerEntry:
    key: str
    fence: int
    pid: int | None
    written_at_ms: int


@dataclass(frozen=True)
class DeadLetter:
    original_id: str
    reason: str | None  # None: SQS moved it; the layer's own sends carry a reason


@dataclass
class Verdict:
    expected: int = 0
    exactly_once: int = 0
    doubles: dict[str, int] = field(default_factory=dict)  # key -> executions (log entries)
    double_causes: Counter[str] = field(default_factory=Counter)
    missing: set[str] = field(default_factory=set)  # keys with no effect at all
    processed: int = 0  # messages whose key took effect
    dead_lettered: Counter[str] = field(default_factory=Counter)  # reason -> messages
    redriven: int = 0  # messages in the DLQ without a reason
    valid_in_dlq: int = 0  # valid messages (not poison) found in the DLQ
    poison: int = 0
    poison_with_reason: int = 0
    lost: list[str] = field(default_factory=list)  # message ids: not processed, not in the DLQ
    stuck: list[str] = field(default_factory=list)  # IN_PROGRESS past the lease
    retryable_failed: list[str] = field(default_factory=list)
    left_in_queue: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.doubles
            or self.missing
            or self.lost
            or self.stuck
            or self.retryable_failed
            or self.redriven
            or self.left_in_queue
        )


def read_ledger(ddb: DynamoDBClient, table: str) -> dict[str, list[LedgerEntry]]:
    entries: dict[str, list[LedgerEntry]] = {}
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page.get("Items", []):
            detail = json.loads(item.get("detail", {}).get("S", "{}"))
            entry = LedgerEntry(
                key=item["pk"]["S"],
                fence=int(item.get("fence", {}).get("N", "0")),
                pid=writer_pid(detail),
                written_at_ms=int(item.get("written_at_ms", {}).get("N", "0")),
            )
            entries.setdefault(entry.key, []).append(entry)
    return entries


def writer_pid(detail: Any) -> int | None:
    """The process that wrote an entry: the consumer's own note, else the log's execution."""
    if not isinstance(detail, dict):
        return None
    execution = detail.get("execution")
    pid = detail.get("pid", execution.get("pid") if isinstance(execution, dict) else None)
    return pid if isinstance(pid, int) else None


def drain_dead_letters(sqs: SQSClient, queue_url: str) -> list[DeadLetter]:
    """Receive and delete everything in the DLQ (the next run needs it empty)."""
    found: list[DeadLetter] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            WaitTimeSeconds=0,
            VisibilityTimeout=60,
        ).get("Messages", [])
        if not got:
            return found
        for message in got:
            found.append(read_dead_letter(message))
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
            ],
        )


def read_dead_letter(message: Any) -> DeadLetter:
    attributes = message.get("MessageAttributes") or {}
    original = attributes.get("eo-original-message-id", {}).get("StringValue")
    kind = attributes.get("eo-error-type", {}).get("StringValue")
    if kind is None and "eo-failure" in attributes:  # the layer's packed form
        packed = json.loads(attributes["eo-failure"].get("StringValue", "{}"))
        kind, original = packed.get("eo-error-type"), packed.get("eo-original-message-id")
    return DeadLetter(original or message["MessageId"], kind)


def _scan(ddb: DynamoDBClient, table: str) -> Iterator[dict[str, Any]]:
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        yield from page.get("Items", [])


def unfinished_records(
    ddb: DynamoDBClient, table: str, library: Library
) -> tuple[list[str], list[str]]:
    """(IN_PROGRESS past their lease, FAILED but retryable) record ids."""
    if library is Library.LAYER:
        return pending(IdempotencyStore(table, client=ddb))
    now_ms = time.time() * 1000
    stuck = [
        item["id"]["S"]
        for item in _scan(ddb, table)
        if item.get("status", {}).get("S") == "INPROGRESS"
        and float(item.get("in_progress_expiration", {}).get("N", "0")) < now_ms
    ]
    return stuck, []  # Powertools deletes the record of a failed execution


def pending(store: Store) -> tuple[list[str], list[str]]:
    """(IN_PROGRESS past their lease, FAILED but retryable) record ids, from the layer's own
    listing: the same on every store."""
    stuck = [r.record_id for r in store.list_pending(Status.IN_PROGRESS, stuck_only=True)]
    retryable = [
        r.record_id
        for r in store.list_pending(Status.FAILED)
        if r.error is None or r.error.retryable
    ]
    return stuck, retryable


def cause_of(entries: list[LedgerEntry], killed: set[int], paused: set[int]) -> str:
    pids = {e.pid for e in entries if e.pid is not None}
    if pids & paused:
        return ZOMBIE
    if pids & killed:
        return KILLED
    return OVERRUN


def account(
    plan: Plan,
    sent: dict[int, str],
    ledger: dict[str, list[LedgerEntry]],
    dead_letters: list[DeadLetter],
    unfinished: tuple[list[str], list[str]],
    left_in_queue: int,
    killed_pids: set[int],
    paused_pids: set[int],
) -> Verdict:
    verdict = Verdict(expected=len(plan.keys), left_in_queue=left_in_queue)
    verdict.stuck, verdict.retryable_failed = unfinished
    for key in plan.keys:
        entries = ledger.get(key, [])
        if len(entries) == 1:
            verdict.exactly_once += 1
        elif not entries:
            verdict.missing.add(key)
        else:
            verdict.doubles[key] = len(entries)
            verdict.double_causes[cause_of(entries, killed_pids, paused_pids)] += 1

    reasons: dict[str, str | None] = {}
    for letter in dead_letters:
        # A message dead-lettered twice (its delete was lost) keeps the reasoned copy.
        if reasons.get(letter.original_id) is None:
            reasons[letter.original_id] = letter.reason
    for index, planned in enumerate(plan.messages):
        mid = sent.get(index)
        in_dlq = mid is not None and mid in reasons
        reason = reasons.get(mid) if mid is not None else None
        if planned.kind.poison:
            verdict.poison += 1
            verdict.poison_with_reason += int(reason is not None)
        elif in_dlq:
            verdict.valid_in_dlq += 1
        if planned.key in plan.keys and ledger.get(planned.key):
            verdict.processed += 1
        elif in_dlq and reason is not None:
            verdict.dead_lettered[reason] += 1
        elif in_dlq:
            verdict.redriven += 1
        else:
            verdict.lost.append(mid or f"(unsent #{index})")
    return verdict
