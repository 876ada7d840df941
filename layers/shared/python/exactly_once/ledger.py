"""An append-only effect ledger: one item per executed side effect, carrying its fence.

The examples write their effect here so that tests, demos and the chaos harness can count
effects per key. `record_effect` is the exactly-once way (fenced, see effects.py);
`append_entry` is a plain PutItem, kept to show what happens without the fence.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import TYPE_CHECKING, Any

from exactly_once import clients
from exactly_once.effects import put_once

if TYPE_CHECKING:
    from exactly_once.processor import RecordContext


def _entry(key: str, fence: int, message_id: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "pk": {"S": key},
        "sk": {"S": f"{fence:012d}#{uuid.uuid4().hex}"},
        "fence": {"N": str(fence)},
        "message_id": {"S": message_id},
        "detail": {"S": json.dumps(detail, default=str, sort_keys=True)},
        "written_at_ms": {"N": str(int(time.time() * 1000))},
    }


def record_effect(
    ctx: RecordContext, detail: dict[str, Any], table: str | None = None
) -> str | None:
    """Write this key's one ledger entry, fenced; None when an earlier holder already did."""
    item = _entry(ctx.key, ctx.fence, ctx.message_id, detail)
    if put_once(ctx, table or os.environ["LEDGER_TABLE"], item):
        return str(item["sk"]["S"])
    return None


def append_entry(
    key: str, fence: int, message_id: str, detail: dict[str, Any], table: str | None = None
) -> str:
    """Write one ledger entry and return its sort key. Never overwrites: each key is unique."""
    item = _entry(key, fence, message_id, detail)
    clients.dynamodb().put_item(
        TableName=table or os.environ["LEDGER_TABLE"],
        Item=item,
        ConditionExpression="attribute_not_exists(pk)",
    )
    return str(item["sk"]["S"])
