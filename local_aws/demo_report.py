"""What became of a sent workload: the poller's counts, the DLQs and, for the verdict, the ledger.

The verdict comes from the execution log (one entry per execution of the business effect), not
from counters: every valid business key must have been executed exactly once, and every poison
message must be in a DLQ. Counts are this workload's: its DLQ messages are those whose body
names its run, and what the counters held before it was sent is subtracted. `make run` sends
the topic's messages first, and the topic's poison reaches the Orders DLQ too: `in_run` counts
each DLQ since the run started, so the table can say how much of the queue's content is the
topic's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from local_aws.demo import LedgerCheck, LedgerReader, check_ledger, dead_letter_reasons
from local_aws.demo_workload import SentWorkload

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@dataclass
class DemoReport:
    sent: dict[str, int]
    duplicates_planned: int
    poison_planned: int
    totals: dict[str, int] | None  # None: no local poller to ask (a stack in AWS)
    dead_letters: dict[str, dict[str, int]]  # the workload's own messages in each DLQ
    ledger: LedgerCheck
    drained: bool
    elapsed_s: float
    in_run: dict[str, int] | None = None  # each DLQ's messages since the run began (topic's too)

    @property
    def ok(self) -> bool:
        dead = sum(sum(r.values()) for r in self.dead_letters.values())
        return self.drained and self.ledger.ok and dead == self.poison_planned


def build_report(
    sqs: SQSClient,
    ledger: LedgerReader,
    outputs: Mapping[str, str],
    workload: SentWorkload,
    *,
    totals: Mapping[str, int] | None,
    drained: bool,
    elapsed_s: float,
    run_baseline: Mapping[str, Mapping[str, int]] | None = None,
) -> DemoReport:
    """Read the DLQs and the ledger now; `totals` are the poller's counters (since its start).

    `ledger` is the stack's: the ledger table, or PostgreSQL's when that is the store.
    `run_baseline`: each DLQ's reasons before the whole run (before the topic's phase).
    """
    dead_letters = {}
    in_run: dict[str, int] | None = None if run_baseline is None else {}
    for name in workload.sent:
        url = outputs[f"{name}DeadLetterQueueUrl"]
        # The workload's own messages only: whatever else reached the DLQ meanwhile (a message
        # sent by hand, another run's) is not this run's to explain.
        dead_letters[name] = dict(dead_letter_reasons(sqs, url, workload.run_id))
        now = dead_letter_reasons(sqs, url) if in_run is not None else Counter()
        if in_run is not None and run_baseline is not None:
            in_run[name] = (now - Counter(run_baseline.get(name, {}))).total()
    return DemoReport(
        sent=workload.sent,
        duplicates_planned=workload.duplicates,
        poison_planned=workload.poison,
        totals=None if totals is None else dict(Counter(totals) - Counter(workload.totals_before)),
        dead_letters=dead_letters,
        ledger=check_ledger(ledger, set(workload.expected_keys), workload.run_id),
        drained=drained,
        elapsed_s=elapsed_s,
        in_run=in_run,
    )
