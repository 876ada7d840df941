"""Reading records back: one by its id, and the IN_PROGRESS or FAILED ones from the sparse
pending index, shard by shard and page by page, without a Scan.

Apart from the writes because reads decide nothing: they only have to hide what DynamoDB still
holds but the store has forgotten (an item past its TTL that the sweep has not deleted yet, an
index entry that moved on since) and to walk the index's shards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from exactly_once.stores import schema
from exactly_once.stores.dynamodb.expressions import n, names, s
from exactly_once.stores.dynamodb.table import Table
from exactly_once.stores.records import StoredRecord
from exactly_once.stores.schema import Status


def by_id(table: Table, record_id: str, clock: Callable[[], float]) -> StoredRecord | None:
    """The live record (a consistent read), or None when absent or TTL-expired."""
    response = table.client.get_item(
        TableName=table.table_name,
        Key={schema.PARTITION_KEY: s(record_id)},
        ConsistentRead=True,
    )
    item = response.get("Item")
    if not item:
        return None
    record = StoredRecord.from_item(dict(item))
    return None if record.is_expired(clock()) else record


def pending(
    table: Table,
    clock: Callable[[], float],
    status: Status,
    stuck_only: bool,
    limit: int | None,
) -> Iterator[StoredRecord]:
    """The records of `status` in the pending index (see `IdempotencyStore.list_pending`)."""
    if status is Status.COMPLETED:
        raise ValueError("completed records are not in the pending index")
    now = clock()
    condition = "#ps = :shard"
    values: dict[str, Any] = {}
    if stuck_only and status is Status.IN_PROGRESS:
        condition += " AND #pa < :now_ms"
        values[":now_ms"] = n(int(now * 1000))
    found = 0
    for shard in schema.all_pending_shards(status):
        kwargs: dict[str, Any] = {
            "TableName": table.table_name,
            "IndexName": schema.PENDING_INDEX,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names(condition),
            "ExpressionAttributeValues": {**values, ":shard": s(shard)},
        }
        while True:
            page = table.client.query(**kwargs)
            for item in page.get("Items", []):
                record = StoredRecord.from_item(dict(item))
                if record.status is not status or record.is_expired(now):
                    continue
                yield record
                found += 1
                if limit is not None and found >= limit:
                    return
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
