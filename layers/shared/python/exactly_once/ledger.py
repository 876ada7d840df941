"""An effect ledger: one item per executed side effect, carrying its fence.

The examples write their effect here so that tests, demos and the chaos harness can count
effects per key. `record_effect` is the exactly-once way (fenced, see effects.py): its item key
is derived from the business key (`pk` = key, `sk` = "{scope}#{name}"), so a second effect for a
key is impossible for as long as the entry exists, even after the idempotency record expired.
`append_entry` is a plain PutItem with a unique sort key, kept to show what happens without
the fence.

Every entry carries `expires_at` (epoch seconds), the ledger table's TTL attribute:
LEDGER_RETENTION_DAYS after the write (365 by default; 0 writes none, kept forever). The
once-guarantee of `record_effect` lasts exactly as long as the entry: after DynamoDB's TTL
deletes it, a redelivery whose idempotency record has expired too would write the effect again.
Keep the retention well above the idempotency record's TTL and any replay window.
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

TTL_ATTRIBUTE = "expires_at"
RETENTION_VARIABLE = "LEDGER_RETENTION_DAYS"
DEFAULT_RETENTION_DAYS = 365
DAY_S = 86_400


def retention_days() -> int:
    """LEDGER_RETENTION_DAYS, a whole number of days >= 0 (0: no expiry)."""
    text = os.environ.get(RETENTION_VARIABLE, "").strip()
    if not text:
        return DEFAULT_RETENTION_DAYS
    try:
        days = int(text)
    except ValueError:
        raise ValueError(f"{RETENTION_VARIABLE}: expected whole days, got {text!r}") from None
    if days < 0:
        raise ValueError(f"{RETENTION_VARIABLE}: expected 0 or more days, got {days}")
    return days


def _entry(
    key: str, sort_key: str, fence: int, message_id: str, detail: dict[str, Any]
) -> dict[str, Any]:
    now = time.time()
    entry = {
        "pk": {"S": key},
        "sk": {"S": sort_key},
        "fence": {"N": str(fence)},
        "message_id": {"S": message_id},
        "detail": {"S": json.dumps(detail, default=str, sort_keys=True)},
        "written_at_ms": {"N": str(int(now * 1000))},
    }
    days = retention_days()
    if days:
        entry[TTL_ATTRIBUTE] = {"N": str(int(now) + days * DAY_S)}
    return entry


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
