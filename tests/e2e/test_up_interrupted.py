"""`up` told to stop (SIGTERM from `timeout`, CI or a supervisor; SIGHUP from a closed terminal)
while the stack is still starting: everything the serving process started goes, and `up` says
so in one line with a non-zero exit.

The serving process runs in a session of its own (so Ctrl-C in the terminal leaves a stack that
is up alone): a signal to `up` reaches only `up`, which must pass it on. The signal is sent at a
controlled point, once the deploy is running (moto and DynamoDB Local's java are up, the CDK
CLI is deploying), never after a sleep.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from exactly_once_ops.local_state import STATE_DIR_ENV, StatePaths
from local_aws.processes import ProcessId, ProcStat, kill, session_members, still_running
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
EONCE = ROOT / ".venv" / "bin" / "eonce"


def logged_serve_pid(paths: StatePaths) -> int | None:
    """The serving process's pid, once its first log line is out."""
    try:
        found = re.search(r"pid (\d+):", paths.serve_log.read_text())
    except FileNotFoundError:
        return None
    return int(found.group(1)) if found else None


def deploying(member: ProcStat) -> bool:
    """The CDK CLI running `cdk deploy` (node, with the deploy's own arguments)."""
    try:
        argv = Path(f"/proc/{member.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"deploy" in argv and b"--method=direct" in argv


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_while_it_deploys_stops_everything_and_says_so(
    tmp_path: Path, sig: signal.Signals
) -> None:
    paths = StatePaths(tmp_path)
    env = {
        **os.environ,
        STATE_DIR_ENV: str(tmp_path),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "COLUMNS": "200",
    }
    proc = subprocess.Popen(
        [str(EONCE), "up"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    serve: int | None = None
    started: list[ProcessId] = []
    try:

        def mid_deploy() -> int | None:
            assert proc.poll() is None, proc.communicate()
            pid = logged_serve_pid(paths)
            if pid is not None and any(deploying(p) for p in session_members(pid)):
                return pid
            return None

        serve = wait_until(
            mid_deploy, lambda: paths.serve_log.read_text() if paths.logs.exists() else "no log"
        )
        members = session_members(serve)
        started = [p.id for p in members]
        assert {"java", "node"} <= {p.command for p in members}  # DynamoDB Local, the CDK CLI
        assert len(started) >= 4  # serve, moto, java, the CDK CLI (and the app it runs)

        proc.send_signal(sig)
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if serve is not None:  # never leave a stack behind, even when the test fails
            kill([p.id for p in session_members(serve)])

    assert proc.returncode == 128 + sig, (out, err)
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: start-up interrupted by {sig.name}"), line
    # `up` returns once they are gone: nothing is left to wait for.
    assert still_running(started) == []
    assert [p.pid for p in session_members(serve)] == []
    assert paths.holder() is None
    assert not paths.state.exists()
    assert list(paths.assemblies.glob("cdk.out.local-*")) == []  # the deploy's own folder
