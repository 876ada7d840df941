"""Deleting expired records: a scheduled job (a Lambda handler and `eonce db cleanup`), because
PostgreSQL has no TTL. Reads already treat an expired row as absent; this only reclaims space.

Batches keep each transaction short and `SKIP LOCKED` keeps it off rows a holder is writing.
A row is deleted only when its lease has ended too: the TTL always outlives the lease, so this
is belt and braces. Both are judged by the server's clock, as the store judges them (clock.py).
Deleting cannot reset a fence: the next acquire's fence starts above the clock in milliseconds
(postgres/statements.py `ACQUIRE`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from exactly_once.errors import ConfigurationError
from exactly_once.lease import remaining_ms
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.clock import NOW_MS, NOW_S

BATCH = 1_000
_DELETE = f"""
DELETE FROM exactly_once.records WHERE id IN (
    SELECT id FROM exactly_once.records
    WHERE expires_at_s < {NOW_S} AND lease_expires_at_ms < {NOW_MS}
    ORDER BY expires_at_s LIMIT %(batch)s FOR UPDATE SKIP LOCKED)
"""  # noqa: S608 (composed from the clock's constants; values are bound)


def delete_expired(
    conninfo: str,
    *,
    batch: int = BATCH,
    now_s: float | None = None,
    max_batches: int | None = None,
    keep_going: Callable[[], bool] = lambda: True,
) -> int:
    """Delete expired rows in batches until none is left, `max_batches` ran or `keep_going`
    says stop (the Lambda's time); the count. The next run goes on where this one stopped.

    Expiry is judged by the server's clock, or by `now_s` (epoch seconds) when given."""
    params = {"at_ms": None if now_s is None else int(now_s * 1000), "batch": batch}
    deleted = 0
    batches = 0
    with connections.connect(conninfo) as conn:
        while (max_batches is None or batches < max_batches) and keep_going():
            count = conn.execute(_DELETE, params).rowcount
            deleted += max(count, 0)
            batches += 1
            if count < batch:
                break
    return deleted


def handler(event: Any, context: Any) -> dict[str, int]:
    """The scheduled Lambda: delete what expired, within the invocation's time."""
    conninfo = os.environ.get("IDEMPOTENCY_DSN")
    if not conninfo:
        raise ConfigurationError("IDEMPOTENCY_DSN is not set")
    return {"deleted": delete_expired(conninfo, keep_going=lambda: remaining_ms(context) > 30_000)}
