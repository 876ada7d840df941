"""SIGTERM and SIGHUP take Ctrl-C's path: the `finally` blocks run and stop the children."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from local_aws.processes import ProcessId, descendants, wait_gone
from local_aws.signals import Terminated, terminate_on_signals

ROOT = Path(__file__).resolve().parents[2]

# A parent with a child of its own, stopped in `finally`, as run/serve stop moto and java.
SCRIPT = textwrap.dedent(
    """
    import subprocess, sys, time
    from local_aws.signals import terminate_on_signals

    with terminate_on_signals():
        child = subprocess.Popen(["sleep", "300"])
        try:
            print("ready", flush=True)
            time.sleep(300)
        except KeyboardInterrupt as exc:
            print(f"interrupted by {exc}", flush=True)
        finally:
            print("cleaning", flush=True)
            time.sleep(float(sys.argv[1]))  # a slow clean-up that a second signal must not cut
            child.terminate()
            child.wait()
            print("cleaned", flush=True)
    """
)


def start(cleanup_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(cleanup_s)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def children_of(proc: subprocess.Popen[str]) -> list[ProcessId]:
    found = [p.id for p in descendants(proc.pid)]
    assert found
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_runs_the_clean_up_and_leaves_no_child(sig: signal.Signals) -> None:
    proc = start(cleanup_s=0)
    children = children_of(proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.split() == ["interrupted", "by", sig.name, "cleaning", "cleaned"]
    assert wait_gone(children, 10) == []


def test_a_second_signal_does_not_cut_the_clean_up_short() -> None:
    proc = start(cleanup_s=1)
    children = children_of(proc)
    assert proc.stdout is not None
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().startswith("interrupted")
    assert proc.stdout.readline().strip() == "cleaning"
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.strip() == "cleaned"
    assert wait_gone(children, 10) == []


def test_handlers_are_restored_and_terminated_is_a_keyboard_interrupt() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with terminate_on_signals():
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before
    assert isinstance(Terminated(signal.SIGHUP), KeyboardInterrupt)
    assert str(Terminated(signal.SIGTERM)) == "SIGTERM"
