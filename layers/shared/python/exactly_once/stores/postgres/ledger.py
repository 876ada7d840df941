"""The examples' effect ledger in PostgreSQL, written in the holder's transaction
(`ctx.transaction`): the entry commits exactly when the COMPLETED record does.

`record_effect` keys the entry by the business key, so even a later generation of the record
(after it expired and was cleaned up) cannot add a second one. `append_entry` gives every
execution its own row: only the transaction keeps it to one per key, which is what the chaos
harness measures.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Protocol

from exactly_once.stores.codec import sanitise
from exactly_once.stores.postgres.ids import db_key


class LockedContext(Protocol):
    """What the ledger reads of the lock's context (`exactly_once.context.LockedContext`),
    named here so that the store never imports the lock that is built on it."""

    @property
    def key(self) -> str: ...
    @property
    def fence(self) -> int: ...
    @property
    def scope(self) -> str: ...
    @property
    def origin_id(self) -> str: ...
    @property
    def transaction(self) -> Any: ...


_INSERT = (
    "INSERT INTO exactly_once.ledger (pk, sk, fence, message_id, detail, written_at_ms) "
    "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (pk, sk) DO NOTHING RETURNING sk"
)


def record_effect(ctx: LockedContext, detail: dict[str, Any], name: str = "effect") -> str | None:
    """Write this key's one `name` entry in the transaction; None when it already exists."""
    return _insert(ctx, f"{ctx.scope}#{name}", detail)


def append_effect(
    ctx: LockedContext, detail: dict[str, Any], name: str = "effect", execution_id: str = ""
) -> str:
    """Log this execution of `name` in the transaction, as a row of its own
    (`sk` = "{scope}#{name}#<execution id>"): it commits with the completion and a zombie's
    rolls back with its own, so the rows count the executions that took effect."""
    sort_key = f"{ctx.scope}#{name}#{execution_id or uuid.uuid4().hex}"
    return _insert(ctx, sort_key, detail) or sort_key


def append_entry(ctx: LockedContext, detail: dict[str, Any]) -> str | None:
    """Write a new entry for this execution in the transaction (no key of its own)."""
    return _insert(ctx, f"{ctx.fence:015d}#{uuid.uuid4().hex}", detail)


def _insert(ctx: LockedContext, sort_key: str, detail: dict[str, Any]) -> str | None:
    row = ctx.transaction.execute(
        _INSERT,
        (
            db_key(ctx.key),  # as the store keeps it: text cannot hold NUL
            sort_key,
            ctx.fence,
            sanitise(ctx.origin_id),
            json.dumps(detail, default=str, sort_keys=True),
            int(time.time() * 1000),
        ),
    ).fetchone()
    return None if row is None else str(row[0])
