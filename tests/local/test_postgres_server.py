"""The local PostgreSQL server: loopback only, its own folder, clear failures, and the wheel's
binaries as the fallback for machines without PostgreSQL."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from local_aws import postgres_server as pg
from local_aws.postgres_server import PostgresServer, PostgresServerError


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Where servers make their temporary folders, so a test can see what is left behind.

    Not pytest's tmp_path: as root the server runs as another account, which cannot enter it.
    """
    base = Path(tempfile.mkdtemp(prefix="eonce-pg-test-"))
    base.chmod(0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pg.BIN_ENV, raising=False)


def port_is_free(port: int) -> bool:
    """Nothing listens on the port: we can listen there ourselves."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
        return True


def server_address(dsn: str) -> tuple[str, int]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT host(inet_server_addr()), inet_server_port()").fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


@pytest.mark.usefixtures("clean_env")
def test_a_server_listens_on_loopback_and_stop_frees_its_port_and_folder(scratch: Path) -> None:
    server = PostgresServer(fsync=False).start()
    try:
        data_dir = server.data_dir
        assert data_dir is not None
        assert data_dir.is_relative_to(scratch)
        assert server_address(server.dsn) == ("127.0.0.1", server.port)
        assert not port_is_free(server.port)
        with psycopg.connect(server.dsn) as conn:
            settings = conn.execute(
                "SELECT current_setting('listen_addresses'), "
                "current_setting('unix_socket_directories'), "
                "current_setting('max_connections'), current_setting('fsync'), current_user"
            ).fetchone()
        assert settings == ("127.0.0.1", str(data_dir), "200", "off", "postgres")
        if os.geteuid() == 0:  # postgres refuses root: the cluster belongs to another account
            assert data_dir.stat().st_uid != 0
    finally:
        server.stop()
    assert not server.running
    assert port_is_free(server.port)
    assert list(scratch.iterdir()) == []


@pytest.mark.usefixtures("clean_env", "scratch")
def test_two_servers_run_side_by_side_with_their_own_data() -> None:
    with PostgresServer(fsync=False) as first, PostgresServer(fsync=False) as second:
        assert first.port != second.port
        assert first.data_dir != second.data_dir
        with psycopg.connect(first.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE only_in_first (x int)")
        with psycopg.connect(second.dsn) as conn:
            row = conn.execute("SELECT to_regclass('only_in_first') IS NULL").fetchone()
        assert row == (True,)
        assert server_address(second.dsn)[1] == second.port


@pytest.mark.usefixtures("clean_env")
def test_a_given_data_dir_is_kept_and_reused(scratch: Path) -> None:
    data_dir = scratch / "kept"
    with (
        PostgresServer(data_dir, fsync=False) as server,
        psycopg.connect(server.dsn, autocommit=True) as conn,
    ):
        conn.execute("CREATE TABLE survives (x int)")
        conn.execute("INSERT INTO survives VALUES (7)")
    assert (data_dir / "PG_VERSION").is_file()
    with PostgresServer(data_dir, fsync=False) as again, psycopg.connect(again.dsn) as conn:
        assert conn.execute("SELECT x FROM survives").fetchall() == [(7,)]


def test_a_bogus_binary_dir_fails_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> None:
    bogus = scratch / "no-postgres-here"
    monkeypatch.setenv(pg.BIN_ENV, str(bogus))
    with pytest.raises(PostgresServerError) as raised:
        PostgresServer().start()
    message = str(raised.value)
    assert message == f"EONCE_PG_BIN directory {bogus} has no initdb, pg_ctl, postgres"
    assert list(scratch.iterdir()) == []


@pytest.mark.usefixtures("clean_env")
def test_a_taken_port_fails_with_the_server_log_and_leaves_nothing(scratch: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = int(squatter.getsockname()[1])
        with pytest.raises(PostgresServerError) as raised:
            PostgresServer(port=port, fsync=False).start()
    first, *log_tail = str(raised.value).splitlines()
    assert first.startswith(f"PostgreSQL did not start on 127.0.0.1:{port} (pg_ctl from ")
    assert any("Address already in use" in line for line in log_tail)
    assert list(scratch.iterdir()) == []


def wheel_bin() -> Path:
    """The pgserver wheel's binaries: a dev requirement, so `make setup` always installs it."""
    bin_dir = pg.wheel_bin_dir()
    assert bin_dir is not None, "pgserver (requirements-dev.txt) is not installed"
    return bin_dir


@pytest.mark.usefixtures("scratch")
def test_the_pgserver_wheel_binaries_run_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = wheel_bin()
    monkeypatch.setenv(pg.BIN_ENV, str(bin_dir))
    with PostgresServer(fsync=False) as server:
        assert server.binaries.bin_dir == bin_dir
        with psycopg.connect(server.dsn) as conn:
            row = conn.execute("SELECT 6 * 7").fetchone()
        assert row == (42,)
        assert server_address(server.dsn) == ("127.0.0.1", server.port)


@pytest.mark.usefixtures("clean_env")
def test_without_postgres_on_path_the_wheel_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bin_dir = wheel_bin()
    monkeypatch.setenv("PATH", str(tmp_path))
    found = pg.find_binaries()
    assert (found.source, found.bin_dir) == ("pgserver wheel", bin_dir)


@pytest.mark.usefixtures("clean_env")
def test_with_no_binaries_anywhere_the_error_says_where_to_get_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(pg, "wheel_bin_dir", lambda: None)
    with pytest.raises(PostgresServerError, match="set EONCE_PG_BIN") as raised:
        pg.find_binaries()
    assert len(str(raised.value).splitlines()) == 1
