"""The OrderProcessor's business tables, in a PostgreSQL schema of their own.

`orders` has deliberately no UNIQUE(order_id): it stands for the many effects that have no
natural constraint to turn a double into an error (a stock decrement, a ledger line, an email
queued in an outbox table). Exactly once must come from `once`, and the tests count the rows.
`order_dead_letters` keeps every record that is not an order, whole, with the reason.
The idempotency records themselves live in `exactly_once.*` (`eonce db migrate`).
"""

from __future__ import annotations

import psycopg
from psycopg import sql

TABLES = """
CREATE TABLE IF NOT EXISTS {schema}.orders (
    id bigserial PRIMARY KEY,
    order_id text NOT NULL,
    customer text NOT NULL,
    amount_cents bigint NOT NULL,
    kafka_position text NOT NULL,
    written_by text NOT NULL
);
CREATE TABLE IF NOT EXISTS {schema}.order_dead_letters (
    kafka_position text PRIMARY KEY,
    topic text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset bigint NOT NULL,
    record_key bytea,
    record_value bytea,
    reason text NOT NULL
);
"""


def create_tables(dsn: str, schema: str = "shop") -> None:
    """The schema and its two tables (idempotent)."""
    name = sql.Identifier(schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
        for statement in TABLES.split(";"):
            if statement.strip():
                conn.execute(sql.SQL(statement).format(schema=name))
