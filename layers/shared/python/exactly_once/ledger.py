"""An effect ledger: items that record executed side effects, carrying their fence.

Two fenced ways to write an effect (see effects.py), for two different promises:

- `append_effect` is an append-only execution log: every execution writes an entry of its own
  (`sk` = "{scope}#{name}#<execution id>", with its attempt, pid and function), so the entries
  per key count the executions that took effect. Nothing in the item refuses a second one: the
  fence alone does (the record's mark is derived from the key's "{scope}#{name}"), so a zombie's
  write is refused and a takeover after a crash between effect and completion skips it. This is
  what the examples, `make run` and `make chaos` use: their verdicts count executions, so they
  fail if the lock ever lets a key run twice.
- `record_effect` is "once per key, ever": its item key is the business key itself (`pk` = key,
  `sk` = "{scope}#{name}"), so a second effect for a key is impossible for as long as the entry
  exists, even after the idempotency record expired and a late replay runs the function again.
  That same property makes it useless as evidence: a count of its items is one per key by
  construction, whatever the lock did.

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
from exactly_once.stores.codec import sha256_hex

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
        from exactly_once.stores.postgres import ledger

        return ledger.record_effect(ctx, detail, name)
    item = _entry(ctx.key, f"{ctx.scope}#{name}", ctx.fence, ctx.origin_id, detail)
    if put_once(ctx, table or os.environ["LEDGER_TABLE"], item, key_names=("pk", "sk")):
        return str(item["sk"]["S"])
    return None


def execution(attempt: int, execution_id: str | None = None) -> dict[str, Any]:
    """Who executed an effect, for its log entry: its id (fresh unless given), the attempt, the
    process and the function (AWS_LAMBDA_FUNCTION_NAME), so a second entry for a key says where
    it came from."""
    return {
        "id": execution_id or uuid.uuid4().hex,
        "attempt": attempt,
        "pid": os.getpid(),
        "function": os.environ.get("AWS_LAMBDA_FUNCTION_NAME", ""),
    }


def append_effect(
    ctx: LockedContext, detail: dict[str, Any], table: str | None = None, name: str = "effect"
) -> str | None:
    """Log this execution of the key's `name` effect, fenced; None when an earlier holder of
    this record already did (it died between its effect and its completion).

    The entry's sort key is new every time ("{scope}#{name}#<execution id>"), so the count of
    entries per key is the count of executions that took effect. The record's mark is derived
    from the key's "{scope}#{name}", the same for every holder: a zombie is refused
    (`LeaseLost`), and a takeover finds the mark of a holder that crashed after its effect.

    On the PostgreSQL store the entry goes in the holder's transaction (`table` is not used):
    it commits with the COMPLETED record, and a zombie's rolls back with its completion.
    """
    # One id per holder (a digest of its lock token, never the token itself): a second call by
    # the same holder names the same entry, so it cannot return an entry that was never
    # written; every new holder, and every delivery with the lock off, gets a new one.
    lock = ctx._lock
    holder = None if lock is None else sha256_hex(lock.token)[:32]
    logged = {**detail, "execution": execution(ctx.attempt, holder)}
    store = ctx._store
    if store is not None and store.backend == "postgres":
        from exactly_once.stores.postgres import ledger

        return ledger.append_effect(ctx, logged, name, logged["execution"]["id"])
    per_key = f"{ctx.scope}#{name}"
    item = _entry(
        ctx.key, f"{per_key}#{logged['execution']['id']}", ctx.fence, ctx.origin_id, logged
    )
    mark_key = {"pk": {"S": ctx.key}, "sk": {"S": per_key}}
    table_name = table or os.environ["LEDGER_TABLE"]
    if put_once(ctx, table_name, item, key_names=("pk", "sk"), mark_key=mark_key):
        return str(item["sk"]["S"])
    return None


def append_entry(
    key: str,
    fence: int,
    message_id: str,
    detail: dict[str, Any],
    table: str | None = None,
    sort_prefix: str | None = None,
) -> str:
    """Write one ledger entry and return its sort key. Never overwrites: each key is unique.

    `sort_prefix` ("{scope}#{name}"): the entry takes `append_effect`'s shape
    ("{scope}#{name}#<execution id>"), so one reader counts both; by default "<fence>#<id>".
    """
    unique = uuid.uuid4().hex
    sort_key = f"{sort_prefix}#{unique}" if sort_prefix else f"{fence:012d}#{unique}"
    item = _entry(key, sort_key, fence, message_id, detail)
    clients.dynamodb().put_item(
        TableName=table or os.environ["LEDGER_TABLE"],
        Item=item,
        ConditionExpression="attribute_not_exists(pk)",
    )
    return str(item["sk"]["S"])
