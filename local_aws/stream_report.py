"""What became of a stream workload: the consumer's counters, its DLQ, and the ledger.

As for the queues and the topic, the verdict comes from the execution log (`append_effect`: one
entry per execution): every valid order exactly once under the consumer's scope, and each
poison record in the consumer's DLQ. Order is read from the same log: each entry carries the
time it was written (`written_at_ms`), so a customer's orders (one partition key, so one shard)
must have taken effect in the order they were put; an order written before one put ahead of
it on its shard is a violation. The timestamps are milliseconds: two entries of one
millisecond count as in order, one written a millisecond earlier than its predecessor does not.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from local_aws.demo import (
    DynamoLedger,
    LedgerCheck,
    LedgerReader,
    check_ledger,
    dead_letter_reasons,
    run_keys,
)
from local_aws.pg_ledger import PostgresLedger
from local_aws.stream_workload import SentStreamWorkload

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

_FIRST_WRITES = """
SELECT pk, min(written_at_ms) FROM exactly_once.ledger
WHERE strpos(pk, %(run)s) > 0 AND starts_with(sk, %(scope)s)
GROUP BY pk
"""


def first_writes(ledger: LedgerReader, contains: str, scope: str) -> dict[str, int]:
    """Per key (containing `contains`, under `scope`), when its first execution was logged."""
    first: dict[str, int] = {}
    if isinstance(ledger, DynamoLedger):
        pages = ledger.ddb.get_paginator("scan").paginate(
            TableName=ledger.table,
            ProjectionExpression="pk, sk, written_at_ms",
            ConsistentRead=True,
        )
        for page in pages:
            for item in page.get("Items", []):
                key = item["pk"]["S"]
                if contains in key and item["sk"]["S"].startswith(f"{scope}#"):
                    at = int(item["written_at_ms"]["N"])
                    first[key] = min(first.get(key, at), at)
        return first
    if isinstance(ledger, PostgresLedger):
        from exactly_once.stores.postgres import connections

        with connections.connect(ledger.dsn) as conn:
            rows = conn.execute(_FIRST_WRITES, {"run": contains, "scope": f"{scope}#"}).fetchall()
        return {str(pk): int(at) for pk, at in rows}
    raise TypeError(f"no ledger timestamps to read from {type(ledger).__name__}")


def order_violations(
    order_by_customer: Mapping[str, list[str]], written: Mapping[str, int]
) -> list[str]:
    """The customers one of whose orders took effect before an order put ahead of it."""
    broken = []
    for customer, orders in order_by_customer.items():
        times = [written[o] for o in orders if o in written]
        if any(later < earlier for earlier, later in itertools.pairwise(times)):
            broken.append(customer)
    return sorted(broken)


@dataclass
class StreamReport:
    sent: SentStreamWorkload
    scope: str
    counts: dict[str, int]
    dead_letters: dict[str, int]  # this run's records in the consumer's DLQ, by reason
    on_failure: int  # batches the mapping gave up (on-failure queue), this run
    ledger: LedgerCheck
    out_of_order: list[str]  # customers whose orders took effect out of order
    read: bool  # the poller had read the whole stream before the timeout
    elapsed_s: float

    @property
    def dead_lettered(self) -> int:
        return sum(self.dead_letters.values())

    @property
    def ok(self) -> bool:
        return (
            self.read
            and self.ledger.ok
            and self.ledger.executed_once == self.ledger.expected
            and not self.out_of_order
            and self.dead_lettered == self.sent.poison
            and self.on_failure == 0
        )


def build_stream_report(
    sqs: SQSClient,
    ledger: LedgerReader,
    sent: SentStreamWorkload,
    *,
    scope: str,
    dead_letter_url: str,
    on_failure_url: str | None,
    on_failure_before: int,
    counts: Mapping[str, int],
    read: bool,
    elapsed_s: float,
) -> StreamReport:
    written = first_writes(ledger, run_keys(sent.run_id), scope)
    on_failure_now = (
        0 if on_failure_url is None else sum(dead_letter_reasons(sqs, on_failure_url).values())
    )
    return StreamReport(
        sent=sent,
        scope=scope,
        counts=dict(counts),
        dead_letters=dict(dead_letter_reasons(sqs, dead_letter_url, sent.run_id)),
        on_failure=on_failure_now - on_failure_before,
        ledger=check_ledger(ledger, set(sent.expected_keys), sent.run_id, scope),
        out_of_order=order_violations(sent.order_by_customer, written),
        read=read,
        elapsed_s=elapsed_s,
    )


def describe_stream(report: StreamReport) -> list[tuple[str, str]]:
    """The stream table's rows: (what, how many)."""
    sent = report.sent
    c = Counter(report.counts)
    ledger = report.ledger
    reasons = [(f"  because {why}", str(n)) for why, n in sorted(report.dead_letters.items())]
    return [
        ("records put", str(sent.put)),
        ("  of which an order put again", str(sent.duplicates)),
        ("  of which poison", str(sent.poison)),
        ("shards", str(sent.shards)),
        ("invocations (batches)", str(c["invocations"])),
        ("  with batchItemFailures (retried from there)", str(c["partial_responses"])),
        ("  function errors (batch bisected, retried)", str(c["function_errors"])),
        ("records executed (ran and completed)", str(c["processed"])),
        ("duplicates suppressed", str(c["duplicate"])),
        ("transient failures retried", str(c["failed"])),
        ("records behind a failure, left for the retry", str(c["skipped"])),
        (f"in {sent.consumer} DLQ", str(report.dead_lettered)),
        *reasons,
        ("batches given up (on-failure queue)", str(report.on_failure)),
        (
            f"keys executed exactly once (scope {report.scope})",
            f"{ledger.executed_once}/{ledger.expected}",
        ),
        ("keys executed more than once", str(len(ledger.double_effects))),
        ("keys never executed (lost)", str(len(ledger.missing))),
        ("customers whose orders ran out of order", str(len(report.out_of_order))),
    ]


def stream_verdict(report: StreamReport) -> str:
    """The one-line verdict, in `run`'s style (without markup)."""
    sent = report.sent
    ledger = report.ledger
    if report.ok:
        return (
            f"STREAM EXACTLY ONCE: {ledger.executed_once}/{ledger.expected} orders executed once "
            f"in {sent.consumer} ({report.scope}), each customer's in the order put; "
            f"{sent.duplicates} re-put order(s) suppressed, {sent.poison} poison record(s) in "
            "the DLQ"
        )
    return (
        f"STREAM CHECK FAILED: read={report.read}, {ledger.executed_once}/{ledger.expected} "
        f"once, executed twice or more: {len(ledger.double_effects)} "
        f"{sorted(ledger.double_effects)[:3]}, missing={sorted(ledger.missing)[:3]}, "
        f"unexpected={sorted(ledger.unexpected)[:3]}, out of order: {report.out_of_order[:3]}, "
        f"dead-lettered {report.dead_lettered} of {sent.poison} poison, "
        f"{report.on_failure} batch(es) given up"
    )
