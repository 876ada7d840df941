"""Scheduled stuck-lock monitor: how many records are stuck IN_PROGRESS, overdue, or FAILED.

A stuck lock is an IN_PROGRESS record whose lease expired: its holder crashed or timed out and
no redelivery has taken it over yet (or takeover is blocked for that consumer). Overdue work is
IN_PROGRESS past the completion its holder expected (`once(..., expected_duration_s=...)`),
which can be long before its lease ends: slow, not necessarily dead. FAILED records wait for a
person. Both come from the pending records only (DynamoDB's sparse index, PostgreSQL's partial
index), so this never scans the store. The store is the one the environment names
(IDEMPOTENCY_TABLE or IDEMPOTENCY_DSN), as for every entry point.
Counts go out as Powertools metrics (namespace ExactlyOnce) for the alarms; a sample of ids goes
to the log so whoever is paged can start with `store.get` / `reset`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from exactly_once.stores.protocol import Store, open_store
from exactly_once.stores.records import StoredRecord
from exactly_once.stores.schema import Status

STUCK_LOCKS = "StuckLocks"
OVERDUE_WORK = "OverdueWork"
FAILED_RECORDS = "FailedRecords"
SAMPLE_SIZE = 10

logger = Logger()
metrics = Metrics()


@dataclass
class Tally:
    """How many records matched (up to `limit`), a few of their ids, and a count per scope."""

    count: int = 0
    truncated: bool = False
    sample: list[str] = field(default_factory=list)
    by_scope: Counter[str] = field(default_factory=Counter)


def tally(records: Iterable[StoredRecord], limit: int) -> Tally:
    result = Tally()
    for record in records:
        if result.count >= limit:
            result.truncated = True
            break
        result.count += 1
        result.by_scope[record.record_id.split("#", 1)[0]] += 1
        if len(result.sample) < SAMPLE_SIZE:
            result.sample.append(record.record_id)
    return result


@dataclass(frozen=True)
class MonitoredStore:
    """The store settings (stores.StoreSettings) from the environment; the monitor only reads,
    so the TTLs and the result cap are never used."""

    table_name: str | None
    dsn: str | None
    record_ttl_s: int = 15 * 86_400
    failed_ttl_s: int = 30 * 86_400
    result_cap_bytes: int = 64 * 1024

    @classmethod
    def from_environment(cls) -> MonitoredStore:
        return cls(
            table_name=os.environ.get("IDEMPOTENCY_TABLE") or None,
            dsn=os.environ.get("IDEMPOTENCY_DSN") or None,
        )


def survey(store: Store, limit: int) -> dict[str, Tally]:
    """Count stuck and failed records; `limit` bounds the work when something went very wrong."""
    return {
        # limit + 1 so that hitting the bound is visible as `truncated`
        STUCK_LOCKS: tally(
            store.list_pending(Status.IN_PROGRESS, stuck_only=True, limit=limit + 1), limit
        ),
        OVERDUE_WORK: tally(store.list_overdue(limit=limit + 1), limit),
        FAILED_RECORDS: tally(store.list_pending(Status.FAILED, limit=limit + 1), limit),
    }


@metrics.log_metrics
@logger.inject_lambda_context
def handle(event: dict[str, Any], context: Any) -> dict[str, int]:
    store = open_store(MonitoredStore.from_environment())
    limit = int(os.environ.get("LOCK_MONITOR_MAX_COUNT", "10000"))
    found = survey(store, limit)
    for name, result in found.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=result.count)
        if result.count:
            logger.warning(
                f"{result.count} {name}",
                extra={
                    "metric": name,
                    "count": result.count,
                    "truncated": result.truncated,
                    "by_scope": dict(result.by_scope),
                    "sample_ids": result.sample,
                },
            )
    return {name: result.count for name, result in found.items()}
