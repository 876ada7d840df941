"""Descendants by /proc parent links; a zombie or a reused pid is not the recorded process."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from local_aws.processes import (
    ProcessId,
    descendants,
    kill,
    running,
    session_members,
    stat,
    wait_gone,
)
from tests.waiting import wait_until


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[bytes]]:
    """sh -> (sleep, sh -> sleep): two children and a grandchild, in a session of their own."""
    proc = subprocess.Popen(
        ["sh", "-c", "sleep 300 & sh -c 'sleep 301 & wait' & wait"], start_new_session=True
    )
    wait_until(lambda: len(descendants(proc.pid)) >= 3, lambda: descendants(proc.pid))
    yield proc
    os.killpg(proc.pid, 9)
    proc.wait()


def test_descendants_include_grandchildren_and_the_session_holds_them_all(
    tree: subprocess.Popen[bytes],
) -> None:
    below = descendants(tree.pid)
    assert sorted(p.command for p in below) == ["sh", "sleep", "sleep"]
    assert {p.pid for p in session_members(tree.pid)} == {tree.pid} | {p.pid for p in below}


def test_killed_processes_are_gone_even_as_zombies(tree: subprocess.Popen[bytes]) -> None:
    me = stat(tree.pid)
    assert me is not None
    below = [p.id for p in descendants(tree.pid)]
    kill([me.id, *below])
    assert wait_gone([me.id, *below], 10) == []  # sh stays a zombie until the test reaps it
    info = stat(tree.pid)
    assert info is not None
    assert info.state == "Z"


def test_a_reused_pid_is_not_the_recorded_process() -> None:
    me = stat(os.getpid())
    assert me is not None
    assert running(me.id)
    assert not running(ProcessId(me.pid, me.started + 1))
    assert stat(2**22 + 1) is None  # beyond pid_max
