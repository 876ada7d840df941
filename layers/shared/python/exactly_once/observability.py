"""Structured logs and EMF metrics through Powertools, created on first use.

Powertools Logger and Metrics are the well-kept way to get JSON logs and CloudWatch metrics
without API calls. Per-record keys go in `extra=` (thread-safe), and metrics are added once per
batch from the invoking thread, because the Metrics store is shared and not meant for threads.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from exactly_once.outcomes import Outcome, RecordResult

if TYPE_CHECKING:
    from aws_lambda_powertools import Logger, Metrics

NAMESPACE_DEFAULT = "ExactlyOnce"
_logger: Logger | None = None
_metrics: Metrics | None = None
_metrics_lock = threading.Lock()  # one process may run invocations on several threads (tests)

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


def _metrics_instance() -> Metrics:
    global _metrics
    if _metrics is None:
        from aws_lambda_powertools import Metrics

        _metrics = Metrics(
            namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE_DEFAULT)
        )
    return _metrics


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
    """One EMF document at once (`Started`, `Finished`), dimensioned by scope.

    Not batched like the outcome counts: a lock taken by a process that dies before its batch
    ends must still be counted, or "started minus finished" could never show the lost work.
    Never raises: a metric must not cost the work. Outside Lambda, POWERTOOLS_METRICS_DISABLED
    silences it.
    """
    try:
        from aws_lambda_powertools.metrics import MetricUnit, single_metric
        from aws_lambda_powertools.metrics.functions import is_metrics_disabled

        if is_metrics_disabled():  # single_metric does not check it (Metrics does)
            return
        namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE", NAMESPACE_DEFAULT)
        with single_metric(
            name=name, unit=MetricUnit.Count, value=1, namespace=namespace
        ) as metric:
            metric.service = ""  # falsy: no `service` dimension, as the stack's alarm reads [scope]
            metric.add_dimension(name="scope", value=scope)
    except Exception:
        logger().exception("could not emit a lock metric", extra={"metric": name})


def emit_counts(dimension: str, value: str, counts: dict[str, int]) -> None:
    """One EMF document with the non-zero counts, under one dimension (consumer, api)."""
    from aws_lambda_powertools.metrics import MetricUnit

    with _metrics_lock:
        metrics = _metrics_instance()
        metrics.add_dimension(name=dimension, value=value)
        for name, count in counts.items():
            if count:
                metrics.add_metric(name=name, unit=MetricUnit.Count, value=count)
        metrics.flush_metrics()
