"""An append-only effect ledger: one item per executed side effect, carrying its fence.

The examples write their effect here so that tests, demos and the chaos harness can count
effects per key. It is also the pattern for fencing downstream writes: a store that keeps the
highest fence per key can refuse a write whose fence is lower.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from exactly_once import clients


def append_entry(
    key: str, fence: int, message_id: str, detail: dict[str, Any], table: str | None = None
) -> str:
    """Write one ledger entry and return its sort key. Never overwrites: each key is unique."""
    table_name = table or os.environ["LEDGER_TABLE"]
    sort_key = f"{fence:012d}#{uuid.uuid4().hex}"
    clients.dynamodb().put_item(
        TableName=table_name,
        Item={
            "pk": {"S": key},
            "sk": {"S": sort_key},
            "fence": {"N": str(fence)},
            "message_id": {"S": message_id},
            "detail": {"S": json.dumps(detail, default=str, sort_keys=True)},
            "written_at_ms": {"N": str(int(time.time() * 1000))},
        },
        ConditionExpression="attribute_not_exists(pk)",
    )
    return sort_key
