"""An effect ledger: one item per executed side effect, carrying its fence.

The examples write their effect here so that tests, demos and the chaos harness can count
effects per key. `record_effect` is the exactly-once way (fenced, see effects.py): its item key
is derived from the business key (`pk` = key, `sk` = "{scope}#{name}"), so a second effect for a
key is impossible for as long as the entry exists, even after the idempotency record expired.
`append_entry` is a plain PutItem with a unique sort key, kept to show what happens without
the fence.
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
    from exactly_once.context import LockedContext


def _entry(
    key: str, sort_key: str, fence: int, message_id: str, detail: dict[str, Any]
) -> dict[str, Any]:
    return {
        "pk": {"S": key},
        "sk": {"S": sort_key},
        "fence": {"N": str(fence)},
        "message_id": {"S": message_id},
        "detail": {"S": json.dumps(detail, default=str, sort_keys=True)},
        "written_at_ms": {"N": str(int(time.time() * 1000))},
    }


def record_effect(
    ctx: LockedContext, detail: dict[str, Any], table: str | None = None, name: str = "effect"
) -> str | None:
    """Write this key's one `name` entry, fenced; None when it was already applied.

    On the PostgreSQL store the entry goes in the holder's transaction instead (`table` is not
    used): it commits with the COMPLETED record, and a zombie's rolls back with its completion.
    """
    store = ctx._store
    if store is not None and store.backend == "postgres":
        from exactly_once.postgres import ledger

        return ledger.record_effect(ctx, detail, name)
    item = _entry(ctx.key, f"{ctx.scope}#{name}", ctx.fence, ctx.origin_id, detail)
    if put_once(ctx, table or os.environ["LEDGER_TABLE"], item, key_names=("pk", "sk")):
        return str(item["sk"]["S"])
    return None


def append_entry(
    key: str, fence: int, message_id: str, detail: dict[str, Any], table: str | None = None
) -> str:
    """Write one ledger entry and return its sort key. Never overwrites: each key is unique."""
    item = _entry(key, f"{fence:012d}#{uuid.uuid4().hex}", fence, message_id, detail)
    clients.dynamodb().put_item(
        TableName=table or os.environ["LEDGER_TABLE"],
        Item=item,
        ConditionExpression="attribute_not_exists(pk)",
    )
    return str(item["sk"]["S"])
