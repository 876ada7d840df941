"""The local tools on the PostgreSQL store: `run --store postgres` end to end in a subprocess,
as `make run ARGS="--store postgres"` runs it, and `up --store postgres` … `down`.

Every function process gets IDEMPOTENCY_DSN (the library would refuse it with the table's
variable too), and the verdicts are counted in PostgreSQL's ledger: had a function used the
DynamoDB table, its effects would be missing there and the run would fail.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from exactly_once_cli.app import app
from exactly_once_ops.local_state import STATE_DIR_ENV, StatePaths
from local_aws.local_postgres import postmaster
from local_aws.processes import running
from tests.e2e.test_up_status_down import ROOT, eonce, exports
from tests.waiting import wait_until

LOG_DIR = ROOT / "build" / "local-logs"  # where `run` writes the functions' logs
DSN_LINE = re.compile(r"PostgreSQL \(the idempotency store and the ledger\) at (host=\S+ port=\d+)")


@pytest.fixture
def env() -> Iterator[dict[str, str]]:
    """The console script's environment, with a state folder of the test's own.

    Not pytest's tmp_path: as root the server runs as another account, which cannot enter it.
    """
    state_dir = Path(tempfile.mkdtemp(prefix="eonce-e2e-pg-"))
    state_dir.chmod(0o755)
    found = {
        **os.environ,
        STATE_DIR_ENV: str(state_dir),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "COLUMNS": "200",
    }
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "EONCE_STACK", "IDEMPOTENCY_DSN"):
        found.pop(key, None)
    yield found
    shutil.rmtree(state_dir, ignore_errors=True)


def test_run_on_postgres_takes_every_effect_exactly_once(env: dict[str, str]) -> None:
    args = ["--orders", "20", "--payments", "4", "--poison", "1", "--transient", "0"]
    args += ["--sales", "12", "--redeliveries", "3"]
    done = eonce(env, "run", "--store", "postgres", *args, timeout=600)
    out = done.stdout

    assert done.returncode == 0, out + done.stderr
    assert "EXACTLY ONCE: 16/16 keys executed once, 2 poison message(s) in the DLQs" in out
    assert "API EXACTLY ONCE: 30/30 keys executed once" in out
    assert "TOPIC EXACTLY ONCE: 8/8 keys executed once in each of SalesCounter (sales), " in out
    assert "Traceback" not in done.stderr
    # The DLQ counts agree: the queue table's own poison, plus the topic's share of the queue.
    assert re.search(r"in Orders DLQ from these messages\s*│\s*1 \(", out), out
    assert re.search(r"in Orders DLQ this run \(1 from the topic\)\s*│\s*2\b", out), out
    assert re.search(r"in Orders DLQ from the topic\s*│\s*1 \(NonJsonBody: 1\)", out), out
    logs = "".join(path.read_text(errors="replace") for path in LOG_DIR.glob("*.log"))
    assert "ConfigurationError" not in logs
    # The server went with the run.
    found = DSN_LINE.search(out)
    assert found is not None, out
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(f"{found.group(1)} dbname=postgres user=postgres", connect_timeout=5)


def test_run_on_postgres_with_the_lock_off_fails_every_verdict(env: dict[str, str]) -> None:
    """The self-test: the same run with the idempotency lock off in every function process
    (`--lock-off`); the duplicates execute again, and each verdict, counted from the execution
    log in PostgreSQL, must see it and fail the run."""
    args = ["--orders", "20", "--payments", "6", "--poison", "0", "--transient", "0"]
    args += ["--sales", "12", "--redeliveries", "3", "--duplicates", "0.3", "--lock-off"]
    done = eonce(env, "run", "--store", "postgres", *args, timeout=600)
    out = done.stdout

    assert done.returncode == 1, out + done.stderr
    assert "SELF-TEST: the idempotency lock is OFF" in out
    for head in ("CHECK FAILED", "API CHECK FAILED", "TOPIC CHECK FAILED", "STREAM CHECK FAILED"):
        assert head in out, out
    # each failure names the keys executed twice or more (at least one per verdict)
    doubles = [int(n) for n in re.findall(r"executed twice or more: (\d+)", out)]
    assert len(doubles) == 1 + 1 + 2 + 1, out  # queues, API, the topic's two receivers, stream
    assert all(n > 0 for n in doubles), out
    assert "EXACTLY ONCE" not in out  # no verdict passed
    assert "Traceback" not in done.stderr


def test_up_on_postgres_serves_the_tools_and_down_stops_its_server(env: dict[str, str]) -> None:
    started = eonce(env, "up", "--store", "postgres")
    paths = StatePaths(Path(env[STATE_DIR_ENV]))
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        state = paths.running()
        assert state is not None
        dsn = state.postgres_dsn
        assert dsn is not None
        assert f"PostgreSQL   {dsn}" in started.stdout
        server = postmaster(paths.postgres_data)
        assert server is not None
        shell = {**env, **exports(started.stdout)}

        def cli(*args: str) -> str:
            result = CliRunner().invoke(app, list(args), env=shell)
            assert result.exit_code == 0, result.output
            return result.output

        assert cli("db", "pending").startswith("nothing pending: postgresql://127.0.0.1:")
        cli("send", "--consumer", "orders", "--count", "10")

        def processed() -> int | None:
            with psycopg.connect(dsn) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM exactly_once.records WHERE scope = 'orders' "
                    "AND status = 'COMPLETED'"
                ).fetchone()
            return 10 if row == (10,) else None

        wait_until(processed, lambda: cli("status"), bound_s=180, interval_s=0.5)
        assert "0 record(s) in postgresql://" in cli("locks", "list")  # nothing pending there
        assert "orders" in cli("status")
    finally:
        stopped = eonce(env, "down")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "nothing left running" in stopped.stdout
    assert not running(server)
    assert postmaster(paths.postgres_data) is None
