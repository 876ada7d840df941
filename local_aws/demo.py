"""`make run`: deploy locally, push a workload with duplicates and poison through, and check it.

The verdict comes from the ledger, not from counters. The example functions write it with
`append_effect`, an append-only execution log: one entry per execution of the business effect,
each with its own id (`sk` = "<scope>#effect#<execution id>"), so the entries per key count
executions. Every valid business key must have been executed exactly once, a key executed twice
fails the run, and every poison message must be in a DLQ. (Counting `record_effect` items would
prove nothing: their key is the business key, so a second one can never be written.)
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from exactly_once_ops.message_attributes import ORIGINAL_ID_ATTRIBUTE, error_type, layer_attribute
from exactly_once_ops.send import OutgoingMessage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


REDRIVEN = "redriven by SQS"  # moved by maxReceiveCount, so it carries no reason of ours
RETRIES_EXHAUSTED = "RetriesExhausted"
"""An asynchronous invocation's event after its last failed retry (an SNS subscriber's): Lambda
sends an on-failure destination a record with this condition, or a function's DLQ the event
with RequestID / ErrorCode / ErrorMessage attributes; neither carries a reason of ours."""


@dataclass(frozen=True)
class Workload:
    orders: int = 200  # messages to the standard queue
    payments: int = 40  # messages to the FIFO queue
    duplicate_ratio: float = 0.25  # share of messages that repeat an earlier business id
    poison: int = 2  # messages per queue that can never succeed
    transient_ratio: float = 0.05  # share of unique messages that fail once, then succeed
    work_ms: int = 20  # simulated I/O per record
    accounts: int = 4  # FIFO message groups
    seed: int = 7


@dataclass
class Planned:
    """What was sent, and what the ledger must show afterwards."""

    messages: list[OutgoingMessage] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)  # each must be executed exactly once
    poison: int = 0
    duplicates: int = 0


def _split(total: int, workload: Workload) -> tuple[int, int, int]:
    poison = min(workload.poison, total)
    duplicates = min(round(total * workload.duplicate_ratio), total - poison)
    return total - poison - duplicates, duplicates, poison


def plan_orders(workload: Workload, run_id: str, rng: random.Random) -> Planned:
    unique, duplicates, poison = _split(workload.orders, workload)
    plan = Planned(duplicates=duplicates, poison=poison)
    bodies = []
    for n in range(unique):
        body = {"orderId": f"o-{run_id}-{n}", "amount": n % 97, "workMs": workload.work_ms}
        if rng.random() < workload.transient_ratio:
            body["failTimes"] = 1
        bodies.append(json.dumps(body))
        plan.keys.add(str(body["orderId"]))
    repeats = [rng.choice(bodies) for _ in range(duplicates)] if bodies else []
    poisons = [
        f"this is not JSON {{ (run {run_id}, {n})"  # the run's id: its report finds it in a DLQ
        if n % 2 == 0
        else json.dumps({"orderId": f"bad-{run_id}-{n}", "amount": -1})
        for n in range(poison)
    ]
    everything = bodies + repeats + poisons
    rng.shuffle(everything)
    plan.messages = [OutgoingMessage(body=b) for b in everything]
    return plan


def plan_payments(workload: Workload, run_id: str, rng: random.Random) -> Planned:
    unique, duplicates, poison = _split(workload.payments, workload)
    plan = Planned(duplicates=duplicates, poison=poison)
    messages: list[OutgoingMessage] = []
    sent: list[dict[str, Any]] = []
    for n in range(unique + duplicates + poison):
        account = f"acct-{rng.randrange(max(1, workload.accounts))}"
        if n >= unique + duplicates:
            body: dict[str, Any] = {"paymentId": f"bad-{run_id}-{n}", "accountId": account}
            body["amount"] = "not-a-number"
        elif n >= unique and sent:
            body = rng.choice(sent)  # the same payment again, under a new dedup id
        else:
            body = {"paymentId": f"p-{run_id}-{n}", "accountId": account, "amount": "12.50"}
            body["workMs"] = workload.work_ms
            sent.append(body)
            plan.keys.add(body["paymentId"])
        messages.append(
            OutgoingMessage(
                body=json.dumps(body), group_id=str(body["accountId"]), dedup_id=uuid.uuid4().hex
            )
        )
    plan.messages = messages
    return plan


@dataclass
class LedgerCheck:
    """Executions per expected key, counted from the execution log."""

    expected: int
    executed_once: int  # expected keys with exactly one execution
    double_effects: dict[str, int]  # key -> executions, for every key executed more than once
    missing: set[str]  # expected keys never executed
    unexpected: set[str]  # executed keys of this run that were not expected

    @property
    def ok(self) -> bool:
        return not self.double_effects and not self.missing and not self.unexpected


def run_keys(run_id: str) -> str:
    """The text every business key of one run carries (`o-<run>-3`, `p-<run>-0`, `bad-<run>-1`)."""
    return f"-{run_id}-"


class LedgerReader(Protocol):
    """Where a run's report counts executions: the DynamoDB ledger table, or PostgreSQL's
    `exactly_once.ledger` (local_aws.pg_ledger) when the store is PostgreSQL."""

    def counts(self, contains: str | None = None, scope: str | None = None) -> Counter[str]:
        """Entries (executions) per key; only keys containing `contains`, only entries under
        `scope`."""
        ...


@dataclass(frozen=True)
class DynamoLedger:
    """The ledger table (`LEDGER_TABLE`) the examples write on the DynamoDB store."""

    ddb: DynamoDBClient
    table: str

    def counts(self, contains: str | None = None, scope: str | None = None) -> Counter[str]:
        counts: Counter[str] = Counter()
        paginator = self.ddb.get_paginator("scan")
        # Strongly consistent: in AWS (`eonce report`) an eventually consistent Scan may miss an
        # entry just written, and a key executed twice would be counted once.
        pages = paginator.paginate(
            TableName=self.table, ProjectionExpression="pk, sk", ConsistentRead=True
        )
        for page in pages:
            for item in page.get("Items", []):
                key = item["pk"]["S"]
                if contains is not None and contains not in key:
                    continue
                if scope is None or item["sk"]["S"].startswith(f"{scope}#"):
                    counts[key] += 1
        return counts


def check_ledger(
    ledger: LedgerReader,
    expected: set[str],
    run_id: str | None = None,
    scope: str | None = None,
) -> LedgerCheck:
    """Count executions per key (log entries); with `run_id`, only that run's keys (a stack
    that stays up also holds other runs' and hand-sent messages' entries); with `scope`, only
    the entries written under that idempotency scope (`sk` = "<scope>#<effect>#<execution id>":
    a topic's message takes effect once in each of its subscribers)."""
    counts = ledger.counts(None if run_id is None else run_keys(run_id), scope)
    return LedgerCheck(
        expected=len(expected),
        executed_once=sum(1 for key in expected if counts[key] == 1),
        double_effects={k: n for k, n in counts.items() if n > 1},
        missing={k for k in expected if counts[k] == 0},
        unexpected=set(counts) - expected,
    )


def failure_reason(message: dict[str, Any]) -> str:
    """Why a message is in a DLQ: the layer's reason, else Lambda's (an on-failure record's
    condition, or RetriesExhausted for an event with Lambda's DLQ attributes), else a redrive."""
    attributes = message.get("MessageAttributes", {})
    if reason := error_type(attributes):
        return reason
    if "RequestID" in attributes:
        return RETRIES_EXHAUSTED
    try:
        record = json.loads(message.get("Body", ""))
    except ValueError:
        return REDRIVEN
    context = record.get("requestContext") if isinstance(record, dict) else None
    condition = context.get("condition") if isinstance(context, dict) else None
    if isinstance(condition, str) and "requestPayload" in record:
        return condition
    return REDRIVEN


def dead_letter_reasons(sqs: SQSClient, queue_url: str, run_id: str = "") -> Counter[str]:
    """Count the DLQ's messages by the reason the layer attached (peeking, not deleting); with
    `run_id`, only those whose body names that run (every body a demo workload sends does).

    Copies of one message count once: a standard queue delivers at least once, so two
    invocations can hold the same poison message and each dead-letters it (same
    `eo-original-message-id`). That is one poison message, not a second one nor a loss."""
    reasons: Counter[str] = Counter()
    seen: set[str] = set()
    handles: list[str] = []
    while True:
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            VisibilityTimeout=60,
            WaitTimeSeconds=0,
        ).get("Messages", [])
        if not got:
            break
        for message in got:
            attributes = message.get("MessageAttributes", {})
            original = layer_attribute(attributes, ORIGINAL_ID_ATTRIBUTE) or message["MessageId"]
            if run_id in message.get("Body", "") and original not in seen:
                seen.add(original)
                reasons[failure_reason(dict(message))] += 1
            handles.append(message["ReceiptHandle"])
    for handle in handles:  # make them visible again: this was only a look
        sqs.change_message_visibility(QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0)
    return reasons
