"""An interrupted start-up's clean-up cannot itself be interrupted (issue 26, defect 1).

`up` stops the serving process and sweeps its session when told to stop while the stack
starts. Stopping moto, DynamoDB Local and the CDK CLI takes seconds, and a second Ctrl-C (an
impatient user), or a SIGTERM after a Ctrl-C, arrived as a KeyboardInterrupt in the middle of
that clean-up: `up` exited and left what it had not stopped yet running. The serving process
stood in for here records, when it gets its SIGTERM, which signals its parent (this process,
as `up`) then ignores: no signal is sent to the test process itself.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from exactly_once_ops.local_state import StatePaths
from local_aws.launcher import _stop_child
from tests.waiting import wait_until

SERVING = """
import os, pathlib, signal, sys, time

out = pathlib.Path(sys.argv[1])

def stop(signum, frame):
    status = pathlib.Path(f"/proc/{os.getppid()}/status").read_text()
    ignored = next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:"))
    (out / "ignored").write_text(ignored)
    sys.exit(0)

signal.signal(signal.SIGTERM, stop)
(out / "ready").touch()
while True:
    time.sleep(1)
"""


def test_ctrl_c_sigterm_and_sighup_are_ignored_while_the_start_up_is_cleaned_up(
    tmp_path: Path,
) -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    proc = subprocess.Popen([sys.executable, "-c", SERVING, str(tmp_path)], start_new_session=True)
    try:
        wait_until((tmp_path / "ready").exists, lambda: proc.poll())
        assert _stop_child(proc, StatePaths(tmp_path / "state")) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    mask = int((tmp_path / "ignored").read_text(), 16)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        assert mask & (1 << (sig - 1)), f"{sig.name} would interrupt the clean-up"
    # and they are this process's own again afterwards
    assert {sig: signal.getsignal(sig) for sig in before} == before
