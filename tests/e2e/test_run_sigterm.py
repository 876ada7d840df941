"""`eonce run --keep` stopped with SIGTERM, as `timeout`, CI and supervisors stop it.

Every process it started (moto, DynamoDB Local's java, the pollers, multiprocessing's resource
tracker) must be gone afterwards, with no "leaked semaphore" warning: the same clean stop as
Ctrl-C, from a signal that only the `run` process receives.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from exactly_once_ops.local_state import STATE_DIR_ENV, StatePaths, UpState
from local_aws.processes import ProcessId, descendants, still_running, wait_gone
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
EONCE = ROOT / ".venv" / "bin" / "eonce"


def test_sigterm_during_the_stay_up_phase_stops_every_child(tmp_path: Path) -> None:
    env = {
        **os.environ,
        STATE_DIR_ENV: str(tmp_path),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "COLUMNS": "200",
    }
    args = ["--orders", "20", "--payments", "4", "--poison", "1", "--transient", "0"]
    args += ["--sales", "12", "--redeliveries", "3"]
    proc = subprocess.Popen(
        [str(EONCE), "run", "--keep", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    paths = StatePaths(tmp_path)
    try:

        def serving() -> UpState | None:  # up.json: the report is out, it serves
            assert proc.poll() is None, proc.communicate()
            return paths.running()

        state = wait_until(serving, lambda: "run --keep never started serving", bound_s=300)
        assert state.pid == proc.pid
        children: set[ProcessId] = {p.id for p in descendants(proc.pid)}
        commands = [p.command for p in descendants(proc.pid)]
        assert "java" in commands
        # moto, java, 2x2 poller workers, 2 SNS delivery workers, resource tracker
        assert len(children) >= 1 + 1 + 4 + 2 + 1

        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 0, err  # the report passed; SIGTERM ended the stay-up phase
    assert "EXACTLY ONCE" in out
    assert "API EXACTLY ONCE: 30/30 keys executed once" in out
    # 12 published: 1 poison, 3 the same sale again, so 8 sales, each once per subscriber
    assert "TOPIC EXACTLY ONCE: 8/8 keys executed once in each of SalesCounter (sales), " in out
    assert "Orders (orders); 3 re-published and 3 redelivered message(s) suppressed" in out
    assert "SalesCounter on Sales: 2 retries after 0.5s, 1s, timeout 3s" in out
    assert "Orders: batch 10, timeout 3s; Payments: batch 10, timeout 3s" in out
    assert "export AWS_DEFAULT_REGION=us-east-1" in out
    assert "leaked semaphore" not in err
    assert "Traceback" not in err
    assert wait_gone(children, 30) == []
    assert still_running(children) == []
    assert not paths.state.exists()
    assert paths.holder() is None
