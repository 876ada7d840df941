"""The local stack's PostgreSQL store: migrated when it starts, a fresh cluster in a kept data
directory at every start, and a server that a dead stack left on it stopped first."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from exactly_once.stores.postgres.migrations import pending
from local_aws.local_postgres import LocalPostgres, postmaster
from local_aws.processes import running


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """Not pytest's tmp_path: as root the server runs as another account, which cannot enter it."""
    base = Path(tempfile.mkdtemp(prefix="eonce-local-pg-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_the_store_starts_migrated_and_stops_keeping_its_folder(state_dir: Path) -> None:
    data = state_dir / "postgres"
    with LocalPostgres(data) as store:
        assert pending(store.dsn) == []
        server = postmaster(data)
        assert server is not None
        assert running(server)
    assert postmaster(data) is None
    assert not running(server)
    assert (data / "PG_VERSION").is_file()  # kept for a look at its log until the next start


def test_a_start_stops_the_server_a_dead_stack_left_and_begins_anew(state_dir: Path) -> None:
    data = state_dir / "postgres"
    left = LocalPostgres(data).start()  # never stopped: its stack was killed
    with psycopg.connect(left.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE leftover (n int)")
    old = postmaster(data)
    assert old is not None

    with LocalPostgres(data) as store:
        assert not running(old)
        with psycopg.connect(store.dsn) as conn:
            found = conn.execute("SELECT to_regclass('leftover')").fetchone()
        assert found == (None,)
        assert pending(store.dsn) == []
