"""The books of a PostgreSQL run, read from the database: every ledger row, and the records the
layer still lists as pending.

The consumer's effect is the execution log, one `exactly_once.ledger` row per execution (a fresh
sort key each time), so the row count per key is the number of executions whose transaction
committed: more than one is a double execution, none a lost one.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from exactly_once.stores.postgres.store import PostgresStore
from fault_injection.accounting import LedgerEntry, pending, writer_pid

_LEDGER = "SELECT pk, fence, detail, written_at_ms FROM exactly_once.ledger ORDER BY pk, sk"


def read_ledger(dsn: str) -> dict[str, list[LedgerEntry]]:
    """Every ledger row, by key."""
    entries: dict[str, list[LedgerEntry]] = {}
    with psycopg.connect(dsn) as conn:
        for pk, fence, detail, written_at_ms in conn.execute(_LEDGER):
            try:
                pid = writer_pid(json.loads(detail))
            except ValueError:
                pid = None
            entry = LedgerEntry(str(pk), int(fence), pid, int(written_at_ms))
            entries.setdefault(entry.key, []).append(entry)
    return entries


def unfinished(dsn: str) -> tuple[list[str], list[str]]:
    """(IN_PROGRESS past their lease, FAILED but retryable) record ids, via the store's listing.

    On a pool of its own, closed here: the process-wide pool of `connections` may be shared
    with others (a test session's stores).
    """
    pool: ConnectionPool[psycopg.Connection[Any]]
    with ConnectionPool(dsn, min_size=0, max_size=1, kwargs={"autocommit": True}) as pool:
        return pending(PostgresStore(dsn, pool=pool))
