"""The schema, from the SQL files this package ships (`sql/NNNN_name.sql`), applied in order.

Run by `eonce db migrate`, the CDK app's migration custom resource and the test fixtures, never
at import: a Lambda's cold start must not race other cold starts on DDL. Each file runs once, in
its own transaction with its record in `exactly_once.schema_migrations`, under an advisory lock
so that two deploys applying at once take turns.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from exactly_once.stores.postgres import connections

# pg_advisory_xact_lock key: "eonce" in ASCII, so it never meets an application's own lock.
_LOCK_KEY = 0x656F6E6365
_TRACKING = """
CREATE SCHEMA IF NOT EXISTS exactly_once;
CREATE TABLE IF NOT EXISTS exactly_once.schema_migrations (
    version     text PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


def shipped() -> list[tuple[str, str]]:
    """(version, SQL) for every migration this package ships, in order."""
    files = sorted(
        (entry.name, entry)
        for entry in resources.files("exactly_once.stores.postgres").joinpath("sql").iterdir()
        if entry.name.endswith(".sql")
    )
    return [(name.removesuffix(".sql"), entry.read_text(encoding="utf-8")) for name, entry in files]


def migrate(conninfo: str) -> list[str]:
    """Apply every shipped migration not yet applied; returns the versions it applied."""
    applied: list[str] = []
    with connections.connect(conninfo) as conn:
        conn.autocommit = False
        for version, sql in shipped():
            with conn.transaction():
                _lock(conn)
                if version in _applied(conn):
                    continue
                conn.execute(sql.encode())
                conn.execute(
                    "INSERT INTO exactly_once.schema_migrations (version) VALUES (%s)", (version,)
                )
                applied.append(version)
    return applied


def pending(conninfo: str) -> list[str]:
    """The shipped versions this database has not applied."""
    with connections.connect(conninfo) as conn:
        conn.autocommit = False
        with conn.transaction():
            _lock(conn)
            done = _applied(conn)
    return [version for version, _ in shipped() if version not in done]


def _lock(conn: Any) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
    conn.execute(_TRACKING.encode())


def _applied(conn: Any) -> set[str]:
    rows = conn.execute("SELECT version FROM exactly_once.schema_migrations").fetchall()
    return {str(row[0]) for row in rows}
