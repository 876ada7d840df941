"""The stream batch response: where each shard or partition resumes.

Lambda checkpoints a stream at the lowest position a response names and delivers everything
from it again, so naming more than the first failure of a shard changes nothing; naming a
later one would skip a failed record. One per shard or partition: a Kafka batch holds several.
"""

from __future__ import annotations

from typing import Any

from exactly_once.outcomes import RecordResult
from exactly_once.streams.records import StreamRecord


def stream_response(
    records: list[StreamRecord], results: list[RecordResult]
) -> dict[str, list[dict[str, Any]]]:
    """`{"batchItemFailures": [{"itemIdentifier": ...}]}`: the first failed record of each
    shard or partition. A record without a position is named with "", which Lambda takes as
    the whole batch failed: it cannot be checkpointed past, so it must not be skipped."""
    first: dict[object, Any] = {}
    for record, result in zip(records, results, strict=True):
        group = record.message.group_id
        if result.report_failure and group not in first:
            first[group] = record.position
    return {"batchItemFailures": [{"itemIdentifier": position} for position in first.values()]}
