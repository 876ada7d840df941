"""Run a batch's records: concurrently for standard queues, in order per group for FIFO."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from exactly_once.messages import group_id, is_fifo_event, message_id
from exactly_once.outcomes import Outcome, RecordResult

ProcessOne = Callable[[Any], RecordResult]


def run_standard(records: list[Any], process: ProcessOne, concurrency: int) -> list[RecordResult]:
    """Records are independent, so I/O-bound work overlaps in a bounded thread pool."""
    workers = min(concurrency, len(records))
    if workers <= 1:
        return [process(r) for r in records]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="record") as pool:
        return list(pool.map(process, records))


def run_fifo(records: list[Any], process: ProcessOne, concurrency: int) -> list[RecordResult]:
    """Each message group runs in order and stops at its first reported failure.

    Later records of a failed group are reported failed without running, so SQS redelivers
    them in order; other groups go on in parallel.
    """
    groups: dict[str | None, list[int]] = {}
    for index, record in enumerate(records):
        groups.setdefault(group_id(record), []).append(index)
    results: list[RecordResult | None] = [None] * len(records)

    def run_group(indexes: list[int]) -> None:
        failed = False
        for i in indexes:
            if failed:
                results[i] = RecordResult(
                    message_id(records[i]),
                    Outcome.SKIPPED,
                    True,
                    reason="an earlier message of its group failed",
                )
                continue
            result = process(records[i])
            results[i] = result
            failed = result.report_failure

    workers = min(concurrency, len(groups))
    if workers <= 1:
        for indexes in groups.values():
            run_group(indexes)
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="group") as pool:
            list(pool.map(run_group, groups.values()))
    return [r for r in results if r is not None]


def run_batch(records: list[Any], process: ProcessOne, concurrency: int) -> list[RecordResult]:
    runner = run_fifo if is_fifo_event(records) else run_standard
    return runner(records, process, concurrency)


def batch_response(results: list[RecordResult]) -> dict[str, list[dict[str, str]]]:
    """The partial-batch response; an empty itemIdentifier makes Lambda retry the whole batch."""
    return {
        "batchItemFailures": [{"itemIdentifier": r.message_id} for r in results if r.report_failure]
    }
