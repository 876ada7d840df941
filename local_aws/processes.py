"""Processes as /proc shows them: a process's descendants, and whether one is still running.

A process is named by its pid and its start time, so a pid the kernel reused for something
else never counts as the process that was recorded. A zombie counts as gone: it runs nothing
and holds no port, it only waits for a parent (or PID 1) to reap it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessId:
    pid: int
    started: int  # clock ticks after boot (/proc/<pid>/stat field 22)


@dataclass(frozen=True)
class ProcStat:
    pid: int
    command: str
    state: str
    ppid: int
    pgrp: int
    session: int
    started: int

    @property
    def id(self) -> ProcessId:
        return ProcessId(self.pid, self.started)


def stat(pid: int) -> ProcStat | None:
    """The process's /proc/<pid>/stat, or None if there is no such process."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command sits in parentheses and may itself contain spaces and parentheses.
    command = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    state, ppid, pgrp, session, started = fields[0], *map(int, (*fields[1:4], fields[19]))
    return ProcStat(pid, command, state, ppid, pgrp, session, started)


def all_processes() -> list[ProcStat]:
    found = []
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (info := stat(int(entry.name))) is not None:
            found.append(info)
    return found


def descendants(pid: int) -> list[ProcStat]:
    """Every process below `pid` by parent links (children, grandchildren, ...)."""
    children: dict[int, list[ProcStat]] = {}
    for info in all_processes():
        children.setdefault(info.ppid, []).append(info)
    found: list[ProcStat] = []
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child.pid)
    return found


def session_members(sid: int) -> list[ProcStat]:
    """Every process of a session (all its process groups), orphans included."""
    return [info for info in all_processes() if info.session == sid]


def running(process: ProcessId) -> bool:
    """True while the recorded process exists and is not a zombie."""
    info = stat(process.pid)
    return info is not None and info.started == process.started and info.state != "Z"


def still_running(processes: Iterable[ProcessId]) -> list[ProcessId]:
    return [p for p in processes if running(p)]


def wait_gone(processes: Iterable[ProcessId], timeout_s: float) -> list[ProcessId]:
    """Wait until none of the processes runs; return those still running at the timeout."""
    left = list(processes)
    deadline = time.monotonic() + timeout_s
    while True:
        left = still_running(left)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.1)


def kill(processes: Iterable[ProcessId], sig: int = signal.SIGKILL) -> None:
    """Signal each process that is still the one recorded."""
    for process in processes:
        if running(process):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, sig)
