"""Send the demo workload to a deployed stack and keep what its report must find afterwards.

`run` sends and reports in one go; `eonce workload` saves the record as JSON so that
`eonce report` can check it later against a stack that stays up. The record also keeps what
the DLQs and the poller's counters held before, so that the report counts only this run.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactly_once_ops.local_state import utc_now
from exactly_once_ops.send import send_messages
from local_aws.demo import Planned, Workload, dead_letter_reasons, plan_orders, plan_payments

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

CONSUMERS = ("Orders", "Payments")  # this repository's consumers, which the plans are made for


@dataclass(frozen=True)
class SentBatch:
    consumer: str
    sent: int
    duplicates: int
    poison: int
    throughput: float  # messages per second


@dataclass(frozen=True)
class SentWorkload:
    """What was sent, and what the report subtracts and expects."""

    run_id: str
    batches: list[SentBatch]
    expected_keys: list[str]  # each must have exactly one ledger entry
    dead_letters_before: dict[str, dict[str, int]]
    totals_before: dict[str, int] = field(default_factory=dict)
    sent_at: str = ""

    @property
    def sent(self) -> dict[str, int]:
        return {b.consumer: b.sent for b in self.batches}

    @property
    def duplicates(self) -> int:
        return sum(b.duplicates for b in self.batches)

    @property
    def poison(self) -> int:
        return sum(b.poison for b in self.batches)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: Path) -> SentWorkload:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        data["batches"] = [SentBatch(**b) for b in data["batches"]]
        return cls(**data)


class SendFailed(RuntimeError):
    """SQS refused some of the workload's messages."""


def send_workload(
    sqs: SQSClient,
    outputs: Mapping[str, str],
    workload: Workload,
    *,
    totals_before: Mapping[str, int] | None = None,
) -> SentWorkload:
    """Plan the workload for this run (fresh keys), note the DLQs, send it all."""
    rng = random.Random(workload.seed)
    run_id = uuid.uuid4().hex[:6]
    plans: dict[str, Planned] = {
        "Orders": plan_orders(workload, run_id, rng),
        "Payments": plan_payments(workload, run_id, rng),
    }
    before = {
        name: dict(dead_letter_reasons(sqs, outputs[f"{name}DeadLetterQueueUrl"])) for name in plans
    }
    batches = []
    for name, plan in plans.items():
        report = send_messages(sqs, outputs[f"{name}QueueUrl"], plan.messages, concurrency=4)
        if report.failed:
            raise SendFailed(f"{len(report.failed)} messages could not be sent to {name}")
        batches.append(
            SentBatch(name, report.sent, plan.duplicates, plan.poison, report.throughput)
        )
    return SentWorkload(
        run_id=run_id,
        batches=batches,
        expected_keys=sorted(set().union(*(p.keys for p in plans.values()))),
        dead_letters_before=before,
        totals_before=dict(totals_before or {}),
        sent_at=utc_now(),
    )
