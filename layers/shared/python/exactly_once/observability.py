"""Structured logs and EMF metrics through Powertools, created on first use.

Powertools Logger and Metrics are the well-kept way to get JSON logs and CloudWatch metrics
without API calls. Per-record keys go in `extra=` (thread-safe). Outcome counts go out once per
batch or request; lock events (`Started`, `Finished`) at once, from whichever thread took the
lock, so every document is built in its own EphemeralMetrics and written as one line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import TYPE_CHECKING

from exactly_once import lifecycle
from exactly_once.outcomes import Outcome, RecordResult

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger

NAMESPACE_DEFAULT = "ExactlyOnce"
_logger: Logger | None = None
_write_lock = threading.Lock()  # metric lines come from the batch's threads too

METRIC_NAMES = {
    Outcome.PROCESSED: "Processed",
    Outcome.DUPLICATE: "Duplicates",
    Outcome.IN_PROGRESS: "InProgress",
    Outcome.FAILED: "Failed",
    Outcome.PERMANENT: "Permanent",
    Outcome.DEFERRED: "DeferredByDeadline",
    Outcome.LEASE_LOST: "LeaseLost",
    Outcome.SKIPPED: "SkippedInGroup",
    Outcome.ERROR: "Errors",
}


def logger() -> Logger:
    global _logger
    if _logger is None:
        from aws_lambda_powertools import Logger

        _logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME", "exactly-once"))
    return _logger


def emit_batch_metrics(
    scope: str, results: list[RecordResult], dimension: str = "consumer"
) -> None:
    """One EMF document per batch: a count per outcome, plus takeovers, dimensioned by consumer
    (or by subscriber, for SNS)."""
    if not results:
        return
    counts = {
        name: sum(r.outcome is outcome for r in results) for outcome, name in METRIC_NAMES.items()
    }
    counts["Takeovers"] = sum(r.takeover for r in results)
    counts["DeadLettered"] = sum(r.dead_lettered for r in results)
    emit_counts(dimension, scope, counts)


def count_lock_event(name: str, scope: str) -> None:
    """One EMF document at once (`Started`, `Finished`), dimensioned by scope alone.

    Not batched like the outcome counts: a lock taken by a process that dies before its batch
    ends must still be counted, or "started minus finished" could never show the lost work.
    No `service` dimension: the stack's alarm reads exactly [scope]. Never raises: a metric
    must not cost the work. Outside Lambda, POWERTOOLS_METRICS_DISABLED silences it.
    """
    try:
        _emit({"scope": scope}, {name: 1}, service=False)
    except Exception:
        logger().exception("could not emit a lock metric", extra={"metric": name})


def emit_counts(dimension: str, value: str, counts: dict[str, int]) -> None:
    """One EMF document with the non-zero counts, under one dimension (consumer, api)."""
    _emit({dimension: value}, counts, service=True)


def _emit(dimensions: dict[str, str], counts: dict[str, int], *, service: bool) -> None:
    """Powertools builds the document; we write it as ONE line in ONE write.

    Powertools prints the JSON and its newline as two writes, and the Lambda runtime flushes
    after each, so two of a batch's threads (lock events come from the record threads) could
    share a line, and CloudWatch would drop both documents. EphemeralMetrics keeps no shared
    state, so building needs no lock; only the write is serialised.
    """
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    counts = {name: count for name, count in counts.items() if count}
    if not counts or is_metrics_disabled():
        return
    metrics = EphemeralMetrics(
        namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE_DEFAULT)
    )
    if not service:
        metrics.service = ""  # falsy: Powertools then adds no `service` dimension
    for name, text in dimensions.items():
        metrics.add_dimension(name=name, value=text)
    for name, count in counts.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
    line = json.dumps(metrics.serialize_metric_set(), separators=(",", ":")) + "\n"
    with _write_lock:
        sys.stdout.write(line)


def _new_write_lock() -> None:
    """In a fork child a batch thread may have held the lock at the fork: start unheld."""
    global _write_lock
    _write_lock = threading.Lock()


lifecycle.on_clone(_new_write_lock)
