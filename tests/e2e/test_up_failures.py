"""`up` that cannot come up says why in one line and leaves no process and no state behind."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from exactly_once_ops.local_state import STATE_DIR_ENV, StatePaths
from local_aws.processes import session_members, wait_gone

ROOT = Path(__file__).resolve().parents[2]
EONCE = ROOT / ".venv" / "bin" / "eonce"


def up(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        STATE_DIR_ENV: str(state_dir),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    return subprocess.run(
        [str(EONCE), "up", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def serve_pid(paths: StatePaths) -> int:
    found = re.search(r"pid (\d+):", paths.serve_log.read_text())
    assert found, paths.serve_log.read_text()
    return int(found.group(1))


def assert_nothing_left(paths: StatePaths) -> None:
    assert paths.holder() is None
    assert not paths.state.exists()
    assert not paths.stats.exists()
    # `up` started the serving process in a session of its own: all it started is in there.
    assert wait_gone([p.id for p in session_members(serve_pid(paths))], 30) == []


def test_a_failed_deploy_is_one_line_with_the_reason(tmp_path: Path) -> None:
    result = up(tmp_path, "--stack", "bad_name!")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: the local stack did not start (exit 1): cdk deploy failed")
    assert "stack name 'bad_name!'" in line  # the app's settings refuse it before CloudFormation
    assert_nothing_left(StatePaths(tmp_path))


def test_giving_up_while_it_deploys_stops_everything_it_started(tmp_path: Path) -> None:
    result = up(tmp_path, "--timeout", "4")  # the deploy alone takes longer
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: the local stack was not up within 4s")
    assert_nothing_left(StatePaths(tmp_path))
