"""`db` on a real PostgreSQL server: migrate then nothing pending, cleanup deletes only expired
records, and a database that cannot be reached is one error line."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from exactly_once.stores.postgres.migrations import migrate, shipped
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once_ops.local_state import STATE_DIR_ENV
from local_aws.ports import free_port
from tests.cli.support import Invoke
from tests.conftest import FakeClock

DAY_S = 86_400
VERSIONS = [version for version, _ in shipped()]


@pytest.fixture(autouse=True)
def no_dsn_around(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Neither the shell's IDEMPOTENCY_DSN nor a local stack that is up may answer for --dsn."""
    monkeypatch.delenv("IDEMPOTENCY_DSN", raising=False)
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "no-stack"))


def one_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    return lines[0]


def record_ids(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {str(row[0]) for row in conn.execute("SELECT id FROM exactly_once.records")}


def completed(store: PostgresStore, key: str) -> None:
    lock = store.acquire("orders", key, lease_ms=30_000, owner="test:req").lock
    assert lock is not None
    assert store.complete(lock, {"key": key}).ok


def test_migrate_applies_the_schema_then_nothing_is_pending(cli: Invoke, new_database: str) -> None:
    before = cli("db", "pending", "--dsn", new_database)
    assert before.exit_code == 0, before.output
    assert before.output.split()[: len(VERSIONS)] == VERSIONS
    assert f"{len(VERSIONS)} migration(s) pending" in before.output

    applied = cli("db", "migrate", "--dsn", new_database)
    assert applied.exit_code == 0, applied.output
    assert f"applied {', '.join(VERSIONS)} to postgresql://127.0.0.1:" in applied.output

    after = cli("db", "pending", "--dsn", new_database)
    assert after.exit_code == 0, after.output
    assert one_line(after.output).startswith("nothing pending: postgresql://127.0.0.1:")
    again = cli("db", "migrate", "--dsn", new_database)
    assert one_line(again.output).startswith("nothing to apply: ")


def test_the_dsn_defaults_to_idempotency_dsn(
    cli: Invoke, new_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(new_database)
    monkeypatch.setenv("IDEMPOTENCY_DSN", new_database)
    result = cli("db", "pending")
    assert result.exit_code == 0, result.output
    assert one_line(result.output).startswith("nothing pending: ")


def test_cleanup_deletes_only_the_expired_records(cli: Invoke, new_database: str) -> None:
    migrate(new_database)
    # Written 40 days ago with a 15-day TTL: expired 25 days ago, whatever state they were in.
    then = PostgresStore(new_database, clock=FakeClock(time.time() - 40 * DAY_S))
    for key in ("old-1", "old-2", "old-3"):
        completed(then, key)
    completed(PostgresStore(new_database), "fresh-1")
    assert len(record_ids(new_database)) == 4

    result = cli("db", "cleanup", "--dsn", new_database, "--batch", "2")

    assert result.exit_code == 0, result.output
    assert one_line(result.output).startswith("deleted 3 expired record(s) from postgresql://")
    assert record_ids(new_database) == {"orders#fresh-1"}
    nothing = cli("db", "cleanup", "--dsn", new_database)
    assert one_line(nothing.output).startswith("deleted 0 expired record(s)")


@pytest.mark.parametrize("command", ["migrate", "pending", "cleanup"])
def test_a_server_that_does_not_answer_is_one_error_line(cli: Invoke, command: str) -> None:
    port = free_port()  # nothing listens there
    dsn = f"host=127.0.0.1 port={port} dbname=postgres user=postgres connect_timeout=5"
    result = cli("db", command, "--dsn", dsn)
    assert result.exit_code == 1
    line = one_line(result.output)
    assert line.startswith(f"error: postgresql://127.0.0.1:{port}/postgres: OperationalError: ")
    assert "Connection refused" in line


def test_an_unparsable_dsn_is_one_error_line(cli: Invoke) -> None:
    result = cli("db", "migrate", "--dsn", "not a dsn")
    assert result.exit_code == 1
    assert one_line(result.output) == (
        "error: postgresql (unparsable DSN): the PostgreSQL DSN cannot be parsed "
        "(check its quoting and percent-encoding)"
    )


def test_no_dsn_anywhere_is_a_usage_error(cli: Invoke) -> None:
    result = cli("db", "pending")
    assert result.exit_code == 2
    assert one_line(result.output) == (
        "error: no database: pass --dsn, set IDEMPOTENCY_DSN, or start the local stack with "
        "`eonce up --store postgres`"
    )
