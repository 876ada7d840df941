"""Where one consumer run keeps its idempotency records and its effects, fresh for each run, and
how the books read them back.

- DynamoDB: a pair of tables (idempotency, ledger) named after the run.
- PostgreSQL: a database of its own on the stack's server, migrated; the records and the
  ledger (`exactly_once.ledger`, written in the holder's transaction) are both in it.

Either way one run's records never meet another's, and the workers find theirs in the
environment: `IDEMPOTENCY_TABLE` + `LEDGER_TABLE`, or `IDEMPOTENCY_DSN` (and no table: the
library refuses both).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from fault_injection import accounting
from fault_injection.consumers import Library
from fault_injection.tables import create_run_tables
from local_aws.store_environment import on_postgres

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.postgres_server import PostgresServer


class RunStore(Protocol):
    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """The workers' variables: `base` (the function's) with this run's store selected."""

    def ledger(self) -> dict[str, list[accounting.LedgerEntry]]: ...

    def unfinished(self) -> tuple[list[str], list[str]]:
        """(IN_PROGRESS past their lease, FAILED but retryable) record ids."""

    def raw(self, key: str) -> dict[str, Any]:
        """The ledger items and records behind `key`, for problems.json."""


@dataclass(frozen=True)
class DynamoRunStore:
    ddb: DynamoDBClient
    library: Library
    idempotency: str
    ledger_table: str

    @classmethod
    def create(cls, ddb: DynamoDBClient, library: Library, prefix: str) -> DynamoRunStore:
        idempotency, ledger = create_run_tables(ddb, library, prefix)
        return cls(ddb, library, idempotency, ledger)

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        return {**base, "IDEMPOTENCY_TABLE": self.idempotency, "LEDGER_TABLE": self.ledger_table}

    def ledger(self) -> dict[str, list[accounting.LedgerEntry]]:
        return accounting.read_ledger(self.ddb, self.ledger_table)

    def unfinished(self) -> tuple[list[str], list[str]]:
        return accounting.unfinished_records(self.ddb, self.idempotency, self.library)

    def raw(self, key: str) -> dict[str, Any]:
        items = self.ddb.query(
            TableName=self.ledger_table,
            KeyConditionExpression="pk = :k",
            ExpressionAttributeValues={":k": {"S": key}},
        )["Items"]
        records = [
            item
            for page in self.ddb.get_paginator("scan").paginate(
                TableName=self.idempotency,
                FilterExpression="contains(id, :k)",
                ExpressionAttributeValues={":k": {"S": key}},
            )
            for item in page.get("Items", [])
        ]
        return {"ledger": items, "records": records}


@dataclass(frozen=True)
class PostgresRunStore:
    dsn: str

    @classmethod
    def create(cls, server: PostgresServer, prefix: str) -> PostgresRunStore:
        """A new database named after the run on `server`, with the shipped migrations."""
        import psycopg
        from psycopg import sql

        from exactly_once.stores.postgres.migrations import migrate

        name = re.sub(r"[^a-z0-9_]", "_", prefix.lower())
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        dsn = server.dsn_for(name)
        migrate(dsn)
        return cls(dsn)

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        return on_postgres(base, self.dsn)

    def ledger(self) -> dict[str, list[accounting.LedgerEntry]]:
        from fault_injection import pg_books

        return pg_books.read_ledger(self.dsn)

    def unfinished(self) -> tuple[list[str], list[str]]:
        from fault_injection import pg_books

        return pg_books.unfinished(self.dsn)

    def raw(self, key: str) -> dict[str, Any]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.dsn, row_factory=dict_row) as conn:
            ledger = conn.execute("SELECT * FROM exactly_once.ledger WHERE pk = %s", (key,))
            rows = ledger.fetchall()
            records = conn.execute(
                "SELECT * FROM exactly_once.records WHERE strpos(id, %s) > 0", (key,)
            ).fetchall()
        return {"ledger": rows, "records": records}
