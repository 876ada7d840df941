"""PostgreSQL helpers for the store tests: the ledger, and a store whose pool meets faults."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from exactly_once.stores.postgres.store import PostgresStore
from fault_injection.pg_faults import FaultyPool, faulty_store_pools
from tests.conftest import FakeClock


def business_table(dsn: str, columns: str = "order_id text PRIMARY KEY, payer text") -> str:
    """A business table of the test's own (a fresh name), for writes in a holder's transaction."""
    table = f"payments_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} ({columns})")
    return table


def table_rows(dsn: str, table: str) -> list[tuple[Any, ...]]:
    """What the table holds, committed, in primary-key order."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()  # noqa: S608


def ledger_rows(dsn: str, key: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT sk, fence FROM exactly_once.ledger WHERE pk = %s ORDER BY fence", (key,)
        ).fetchall()


def faulty_store(
    dsn: str, clock: FakeClock, plan: dict[str, list[str | None]]
) -> tuple[PostgresStore, FaultyPool]:
    """A store whose next statements of each kind meet the planned faults, in order."""

    def decide(kind: str) -> str | None:
        planned = plan.get(kind)
        return planned.pop(0) if planned else None

    pools = faulty_store_pools(dsn, decide)
    return PostgresStore(dsn, clock=clock, **pools), pools["pool"]


def insert_entry(conn: Any, key: str, fence: int) -> None:
    conn.execute(
        "INSERT INTO exactly_once.ledger (pk, sk, fence, message_id, detail, written_at_ms) "
        "VALUES (%s, %s, %s, 'm', '{}', 0)",
        (key, f"by-{fence}", fence),
    )


Write = Callable[[Any], None]


def sqs_record_of(body: dict[str, Any]) -> dict[str, Any]:
    """A minimal SQS record around a JSON body, for consumers run in-process."""
    return {
        "messageId": str(uuid.uuid4()),
        "body": json.dumps(body),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
    }
