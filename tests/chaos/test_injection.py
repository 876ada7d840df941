"""Crash and pause points really kill and freeze a process, and log first."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from fault_injection import events, injection
from fault_injection.events import EVENT_DIR_ENV, read_events
from fault_injection.supervisor import process_state
from tests.waiting import wait_until


def run_point(event_dir: str, body: dict[str, object], receive_count: int) -> None:
    os.environ[EVENT_DIR_ENV] = event_dir
    injection.at_point(body, injection.AFTER_EFFECT, "k1", receive_count)


def spawn(tmp_path: Path, body: dict[str, object], receive_count: int = 1) -> BaseProcess:
    process = mp.get_context("spawn").Process(
        target=run_point, args=(str(tmp_path), body, receive_count)
    )
    process.start()
    return process


def wait_for_state(pid: int, state: str) -> None:
    wait_until(lambda: process_state(pid) == state, lambda: process_state(pid))


def test_a_crash_point_sigkills_the_process_after_logging_it(tmp_path: Path) -> None:
    process = spawn(tmp_path, {"crash": injection.AFTER_EFFECT})
    process.join(20)

    assert process.exitcode == -signal.SIGKILL
    [event] = read_events(tmp_path)
    assert (event["kind"], event["point"], event["key"]) == ("crash", "after-effect", "k1")


def test_a_pause_point_stops_the_process_until_it_is_continued(tmp_path: Path) -> None:
    process = spawn(tmp_path, {"pause": injection.AFTER_EFFECT})
    assert process.pid is not None
    wait_for_state(process.pid, "T")

    injection.wake(process.pid, tmp_path)
    process.join(20)

    assert process.exitcode == 0
    assert [e["kind"] for e in read_events(tmp_path)] == ["pause", "resumed"]


def pause_with_a_short_wake_wait(event_dir: str) -> None:
    injection.WAKE_WAIT_S = 0.5
    run_point(event_dir, {"pause": injection.AFTER_EFFECT}, 1)


def test_a_pause_continued_without_its_wake_marker_says_so_and_goes_on(tmp_path: Path) -> None:
    """A `kill -CONT` by hand leaves no marker: the worker logs it rather than wait forever."""
    process = mp.get_context("spawn").Process(
        target=pause_with_a_short_wake_wait, args=(str(tmp_path),)
    )
    process.start()
    assert process.pid is not None
    wait_for_state(process.pid, "T")

    os.kill(process.pid, signal.SIGCONT)
    process.join(20)

    assert process.exitcode == 0
    assert [e["kind"] for e in read_events(tmp_path)] == ["pause", "wake-missed", "resumed"]


def pause_while_another_record_crashes(event_dir: str) -> None:
    """A batch where one record pauses and another crashes at the same moment: the crash is
    fired (on its own thread) right after the pause is logged, before the SIGSTOP is sent."""
    os.environ[EVENT_DIR_ENV] = event_dir
    record = events.record

    def crash_alongside(kind: str, **fields: object) -> None:
        record(kind, **fields)
        if kind == "pause":
            other = {"orderId": "o-2", "crash": injection.AFTER_EFFECT}
            crasher = threading.Thread(
                target=injection.at_point, args=(other, injection.AFTER_EFFECT, "k2", 1)
            )
            crasher.start()
            crasher.join(1.0)  # time enough to kill the process, unless it waits its turn

    events.record = crash_alongside
    injection.at_point(
        {"orderId": "o-1", "pause": injection.AFTER_EFFECT}, injection.AFTER_EFFECT, "k1", 1
    )


def test_a_crash_on_another_thread_waits_until_the_pause_has_frozen_the_process(
    tmp_path: Path,
) -> None:
    """CI once saw a planned zombie never freeze: another record's crash killed its process
    between the pause's log line and its SIGSTOP taking hold."""
    process = mp.get_context("spawn").Process(
        target=pause_while_another_record_crashes, args=(str(tmp_path),)
    )
    process.start()
    assert process.pid is not None
    pid = process.pid
    wait_until(lambda: process_state(pid) in ("T", "Z", None), lambda: process_state(pid))
    assert process_state(pid) == "T", [e["kind"] for e in read_events(tmp_path)]

    injection.wake(pid, tmp_path)
    process.join(20)

    assert process.exitcode == -signal.SIGKILL
    assert [e["kind"] for e in read_events(tmp_path)] == ["pause", "resumed", "crash"]


def test_a_point_fires_once_whichever_delivery_reaches_it_first(tmp_path: Path) -> None:
    """A first delivery may never reach the point (its batch died on another record's crash):
    the fault then fires on a later one, and once only."""
    body: dict[str, object] = {"orderId": "o-1", "crash": injection.AFTER_EFFECT}
    first = spawn(tmp_path, body, receive_count=3)
    first.join(20)
    again = spawn(tmp_path, body, receive_count=4)
    again.join(20)

    assert (first.exitcode, again.exitcode) == (-signal.SIGKILL, 0)
    assert [e["kind"] for e in read_events(tmp_path)] == ["crash"]


def test_transient_failures_follow_the_delivery_count() -> None:
    with pytest.raises(injection.InjectedTransientError):
        injection.maybe_fail({"failTimes": 2}, "k", 2)
    injection.maybe_fail({"failTimes": 2}, "k", 3)
    injection.maybe_fail("not a dict", "k", 1)


def test_receive_count_reads_the_lambda_record() -> None:
    assert injection.receive_count({"attributes": {"ApproximateReceiveCount": "3"}}) == 3
    assert injection.receive_count({"attributes": {"ApproximateReceiveCount": "x"}}) == 1
    assert injection.receive_count(None) == 1


def test_process_state_of_a_missing_process_is_none() -> None:
    assert process_state(2**22 + 12345) is None
    assert process_state(os.getpid()) in {"R", "S"}
