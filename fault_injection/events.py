"""An append-only event log per worker process that survives SIGKILL.

Workers kill themselves mid-batch, so nothing they report may depend on a clean exit or on a
lock shared with other processes (a multiprocessing.Queue's writer lock would stay taken by a
killed writer and hang everyone else). Each process appends JSON lines to its own file with
unbuffered `os.write`; the supervisor reads all files after the run.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EVENT_DIR_ENV = "CHAOS_EVENT_DIR"


class EventLog:
    """Appends one JSON object per line to `<directory>/events-<pid>.jsonl`."""

    def __init__(self, directory: Path | str) -> None:
        self.pid = os.getpid()
        path = Path(directory) / f"events-{self.pid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, kind: str, **fields: Any) -> None:
        """One write(2) per event: it is on disk (page cache) before the next line of code."""
        line = json.dumps({"kind": kind, "pid": self.pid, "t": time.time(), **fields}) + "\n"
        os.write(self._fd, line.encode("utf-8"))

    def close(self) -> None:
        os.close(self._fd)


_lock = threading.Lock()
_current: EventLog | None = None


def current() -> EventLog | None:
    """This process's log, opened on first use from CHAOS_EVENT_DIR; None outside a chaos run."""
    global _current
    directory = os.environ.get(EVENT_DIR_ENV)
    if not directory:
        return None
    with _lock:
        if _current is None or _current.pid != os.getpid():
            _current = EventLog(directory)
        return _current


def record(kind: str, **fields: Any) -> None:
    log = current()
    if log is not None:
        log.write(kind, **fields)


def read_events(directory: Path | str) -> Iterator[dict[str, Any]]:
    """Every event of every process; a line torn by a kill is skipped."""
    for path in sorted(Path(directory).glob("events-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                yield event
