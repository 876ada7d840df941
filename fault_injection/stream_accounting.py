"""Close the books of a Kinesis chaos run from durable state only: the execution log, the DLQ,
the idempotency table, the shards' checkpoints. A killed poller reports nothing, so nothing a
poller reported is trusted here.

The invariants:

* **exactly once**: each planned order has exactly one entry in the append-only execution log
  (an entry per execution: a second one is a double, none a lost order);
* **order kept per shard**: a shard's records are its sequence; each order's position is its
  first record there (a producer's retry comes later and must change nothing), and its effect
  time is its first log entry's `t_ns`. Order is kept when, in every shard, the orders' effect
  times increase with their positions. The count of violations is the fewest orders that would
  have to move for that to hold: the shard's orders minus the longest run of them whose effect
  times increase in sequence order (so one order run late counts once, not once per order it
  overtook);
* **nothing lost**: every record took effect (its order did) or is in the DLQ with its reason;
* **drained**: every shard's checkpoint reached its last record, and no idempotency record is
  left IN_PROGRESS past its lease or FAILED but retryable.
"""

from __future__ import annotations

import base64
import bisect
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fault_injection import accounting
from fault_injection.stream_feed import Placed
from fault_injection.stream_workload import RecordKind, StreamPlan

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


@dataclass(frozen=True)
class Execution:
    key: str
    shard: str
    sequence: str
    t_ns: int
    pid: int | None
    fence: int


@dataclass(frozen=True)
class Letter:
    body: str
    reason: str | None


@dataclass
class StreamVerdict:
    expected: int = 0
    exactly_once: int = 0
    doubles: dict[str, int] = field(default_factory=dict)  # key -> executions
    double_causes: Counter[str] = field(default_factory=Counter)
    missing: set[str] = field(default_factory=set)
    order_checked: int = 0  # orders whose effect was placed in their shard's sequence
    out_of_order: dict[str, list[str]] = field(default_factory=dict)  # shard -> keys moved
    processed: int = 0  # records whose order took effect
    dead_lettered: Counter[str] = field(default_factory=Counter)  # reason -> records
    poison: int = 0
    poison_with_reason: int = 0
    valid_in_dlq: int = 0
    lost: list[int] = field(default_factory=list)  # plan indexes: no effect, not in the DLQ
    unread: int = 0  # records after their shard's checkpoint
    stuck: list[str] = field(default_factory=list)
    retryable_failed: list[str] = field(default_factory=list)

    @property
    def order_violations(self) -> int:
        return sum(len(keys) for keys in self.out_of_order.values())

    @property
    def ok(self) -> bool:
        return not (
            self.doubles
            or self.missing
            or self.out_of_order
            or self.lost
            or self.unread
            or self.stuck
            or self.retryable_failed
        )


def read_executions(ddb: DynamoDBClient, table: str) -> dict[str, list[Execution]]:
    """Every log entry, by key, in the order they were written."""
    found: dict[str, list[Execution]] = {}
    for page in ddb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page.get("Items", []):
            detail = json.loads(item.get("detail", {}).get("S", "{}"))
            entry = Execution(
                key=item["pk"]["S"],
                shard=str(detail.get("shard", "")),
                sequence=str(detail.get("sequence", "")),
                t_ns=int(detail.get("t_ns", 0)),
                pid=accounting.writer_pid(detail),
                fence=int(item.get("fence", {}).get("N", "0")),
            )
            found.setdefault(entry.key, []).append(entry)
    for entries in found.values():
        entries.sort(key=lambda e: e.t_ns)
    return found


def drain_letters(sqs: SQSClient, queue_url: str) -> list[Letter]:
    """Receive and delete everything in the DLQ: each copy's body and reason."""
    found: list[Letter] = []
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
            found.append(
                Letter(message.get("Body", ""), accounting.read_dead_letter(message).reason)
            )
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)
            ],
        )


def dead_letter_body(data: bytes) -> str:
    """How the consumer's DLQ copy carries a record's data: the text, else its base64."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii")


def longest_increasing(values: list[int]) -> set[int]:
    """Indexes of one longest strictly increasing subsequence of `values` (patience sort)."""
    tails: list[int] = []  # tails[k]: the smallest tail value of an increasing run of k + 1
    tail_index: list[int] = []
    previous: list[int] = [-1] * len(values)
    for i, value in enumerate(values):
        k = bisect.bisect_left(tails, value)
        if k == len(tails):
            tails.append(value)
            tail_index.append(i)
        else:
            tails[k] = value
            tail_index[k] = i
        previous[i] = tail_index[k - 1] if k > 0 else -1
    kept: set[int] = set()
    i = tail_index[-1] if tail_index else -1
    while i >= 0:
        kept.add(i)
        i = previous[i]
    return kept


def out_of_order(
    plan: StreamPlan, positions: list[Placed], executions: dict[str, list[Execution]]
) -> tuple[int, dict[str, list[str]]]:
    """(orders placed, shard -> orders whose first effect breaks their shard's sequence)."""
    first: dict[str, Placed] = {}
    for record, position in zip(plan.records, positions, strict=True):
        if record.key in plan.keys and record.key not in first:
            first[record.key] = position
    by_shard: dict[str, list[tuple[int, str]]] = {}
    for key, position in first.items():
        if executions.get(key):
            by_shard.setdefault(position.shard, []).append((position.number, key))
    moved: dict[str, list[str]] = {}
    placed = 0
    for shard, ordered in by_shard.items():
        ordered.sort()
        times = [executions[key][0].t_ns for _, key in ordered]
        kept = longest_increasing(times)
        placed += len(ordered)
        late = [key for i, (_, key) in enumerate(ordered) if i not in kept]
        if late:
            moved[shard] = late
    return placed, moved


def account(
    plan: StreamPlan,
    positions: list[Placed],
    executions: dict[str, list[Execution]],
    letters: list[Letter],
    unfinished: tuple[list[str], list[str]],
    checkpoints: dict[str, str | None],
    killed_pids: set[int],
    paused_pids: set[int],
) -> StreamVerdict:
    verdict = StreamVerdict(expected=len(plan.keys))
    verdict.stuck, verdict.retryable_failed = unfinished
    for key in plan.keys:
        entries = executions.get(key, [])
        if len(entries) == 1:
            verdict.exactly_once += 1
        elif not entries:
            verdict.missing.add(key)
        else:
            verdict.doubles[key] = len(entries)
            as_ledger = [accounting.LedgerEntry(key, e.fence, e.pid, 0) for e in entries]
            verdict.double_causes[accounting.cause_of(as_ledger, killed_pids, paused_pids)] += 1
    verdict.order_checked, verdict.out_of_order = out_of_order(plan, positions, executions)

    reasons: dict[str, str | None] = {}
    for letter in letters:  # a record dead-lettered twice (read again) keeps a reasoned copy
        if reasons.get(letter.body) is None:
            reasons[letter.body] = letter.reason
    for index, (record, position) in enumerate(zip(plan.records, positions, strict=True)):
        checkpoint = checkpoints.get(position.shard)
        if checkpoint is None or int(checkpoint) < position.number:
            verdict.unread += 1
        body = dead_letter_body(record.data)
        in_dlq = body in reasons
        if record.kind.poison:
            verdict.poison += 1
            verdict.poison_with_reason += int(reasons.get(body) is not None)
        elif in_dlq:
            verdict.valid_in_dlq += 1
        if record.key in plan.keys and executions.get(record.key or ""):
            verdict.processed += 1
        elif in_dlq:
            verdict.dead_lettered[reasons[body] or "(no reason)"] += 1
        else:
            verdict.lost.append(index)
    return verdict


def kinds_in(plan: StreamPlan) -> Counter[RecordKind]:
    return Counter(r.kind for r in plan.records)
