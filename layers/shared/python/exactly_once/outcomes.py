"""What happened to each record, and how it is reported to SQS."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    PROCESSED = "processed"  # ran and completed
    DUPLICATE = "duplicate"  # already completed: nothing ran
    IN_PROGRESS = "in_progress"  # another holder's lease is live: retry later
    FAILED = "failed"  # the business function raised: retry later
    PERMANENT = "permanent"  # FAILED for good and sent to the DLQ
    DEFERRED = "deferred"  # not started: the invocation's deadline was too close
    LEASE_LOST = "lease_lost"  # the work happened but another holder now owns the record
    SKIPPED = "skipped"  # FIFO: an earlier record of its message group failed
    ERROR = "error"  # infrastructure trouble (throttling after retries, DLQ send failed...)


@dataclass(frozen=True)
class RecordResult:
    message_id: str
    outcome: Outcome
    report_failure: bool  # True: listed in batchItemFailures so SQS redelivers it
    key: str | None = None
    reason: str | None = None
    fence: int | None = None
    takeover: bool = False
    dead_lettered: bool = False


def count_outcomes(results: list[RecordResult]) -> dict[str, int]:
    """How many records ended each way, for a log line or a summary ({"processed": 2})."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.outcome.value] = counts.get(result.outcome.value, 0) + 1
    return counts
