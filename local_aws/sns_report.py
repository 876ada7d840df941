"""What became of a published topic workload, per receiver: deliveries, DLQs, and the ledger.

As for the queues, the verdict comes from the execution log, not from counters: every valid sale
must have been executed exactly once under each receiver's scope (the direct subscriber's and
each fan-out queue consumer's: one log entry per execution), and each poison message must be in
each receiver's DLQ. The counters (the local delivery's and the poller's) and the DLQ counts
are deltas over the topic's phase: what the topic put there, which `make run`'s queue table
shows as the topic's share of the Orders DLQ.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from local_aws.demo import LedgerCheck, LedgerReader, check_ledger, dead_letter_reasons
from local_aws.sns_workload import Receiver, SentTopicWorkload

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@dataclass
class ReceiverReport:
    receiver: Receiver
    counts: dict[str, int] | None  # None: no local delivery or poller to ask
    dead_letters: dict[str, int]  # new since the workload was published
    ledger: LedgerCheck

    @property
    def dead_lettered(self) -> int:
        return sum(self.dead_letters.values())


@dataclass
class TopicReport:
    sent: SentTopicWorkload
    receivers: list[ReceiverReport]
    drained: bool
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return (
            self.drained
            and bool(self.receivers)
            and all(
                r.ledger.ok and r.ledger.executed_once == r.ledger.expected for r in self.receivers
            )
            and all(r.dead_lettered == self.sent.poison for r in self.receivers)
        )


def build_topic_report(
    sqs: SQSClient,
    ledger: LedgerReader,
    sent: SentTopicWorkload,
    *,
    counts: Mapping[str, Mapping[str, int]] | None,
    drained: bool,
    elapsed_s: float,
) -> TopicReport:
    """Read each receiver's DLQ and ledger entries now; `counts` are each receiver's counters
    over the topic's phase (the delivery's for subscribers, the poller's for queues)."""
    expected = set(sent.expected_keys)
    reports = []
    for receiver in sent.receivers:
        now = dead_letter_reasons(sqs, receiver.dead_letter_url)
        before = Counter(sent.dead_letters_before.get(receiver.name, {}))
        found = None if counts is None else counts.get(receiver.name)
        reports.append(
            ReceiverReport(
                receiver=receiver,
                counts=None if found is None else dict(found),
                dead_letters=dict(now - before),
                ledger=check_ledger(ledger, expected, sent.run_id, receiver.scope),
            )
        )
    return TopicReport(sent=sent, receivers=reports, drained=drained, elapsed_s=elapsed_s)


def describe_receiver(report: ReceiverReport) -> list[tuple[str, str]]:
    """A receiver's rows: (what, how many)."""
    r = report.receiver
    c = Counter(report.counts or {})

    def count(key: str) -> str:
        return "-" if report.counts is None else str(c[key])

    rows = []
    if r.kind == "subscriber":
        rows += [
            (f"{r.name} (Lambda subscriber): SNS deliveries", count("delivered")),
            ("  invocations, Lambda's retries included", count("attempts")),
        ]
    else:
        rows += [(f"{r.name} (SQS subscription): messages received", count("received"))]
    rows += [
        ("  ran and completed", count("processed")),
        ("  duplicates suppressed", count("duplicate")),
        ("  in-progress duplicates deferred", count("in_progress")),
        ("  transient failures retried", count("failed")),
    ]
    if r.kind == "subscriber":
        rows.append(
            ("  raised (Lambda retried, or dead-lettered after its retries)", count("raised"))
        )
    detail = ", ".join(f"{k}: {v}" for k, v in sorted(report.dead_letters.items())) or "none"
    rows.append((f"  in {r.name} DLQ from the topic", f"{report.dead_lettered} ({detail})"))
    ledger = report.ledger
    rows += [
        (
            f"  keys executed exactly once (scope {r.scope})",
            f"{ledger.executed_once}/{ledger.expected}",
        ),
        ("  keys executed more than once", str(len(ledger.double_effects))),
        ("  keys never executed (lost)", str(len(ledger.missing))),
    ]
    return rows


def verdict(report: TopicReport) -> str:
    """The one-line verdict, in `run`'s style (without markup)."""
    sent = report.sent
    names = ", ".join(f"{r.receiver.name} ({r.receiver.scope})" for r in report.receivers)
    if report.ok:
        expected = len(sent.expected_keys)
        return (
            f"TOPIC EXACTLY ONCE: {expected}/{expected} keys executed once in each of {names}; "
            f"{sent.duplicates} re-published and {sent.redelivered} redelivered message(s) "
            f"suppressed, {sent.poison} poison message(s) in each DLQ"
        )
    problems = []
    for r in report.receivers:
        ledger = r.ledger
        problems.append(
            f"{r.receiver.name}: {ledger.executed_once}/{ledger.expected} once, "
            f"executed twice or more: {len(ledger.double_effects)} "
            f"{sorted(ledger.double_effects)[:3]}, missing={sorted(ledger.missing)[:3]}, "
            f"unexpected={sorted(ledger.unexpected)[:3]}, "
            f"dead-lettered {r.dead_lettered} of {sent.poison} poison"
        )
    return f"TOPIC CHECK FAILED: drained={report.drained}; " + "; ".join(problems)
