"""Worker processes for the local stand-ins of Lambda's pollers: start, stop, fold their reports.

The SQS poller and the SNS delivery both run each deployed function in processes of its own
(the function's environment, a real kill on a crash), report what each invocation did over a
queue, and must never outlive the process that started them. This is that shared part.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from abc import abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Generic, Protocol, Self, TypeVar

from local_aws.lifecycle import Lifecycle

Report = TypeVar("Report")


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


class StopOrOrphaned:
    """Set once the supervisor asks its workers to stop, or once the supervisor itself is gone
    (killed outright, so nobody would ever ask): a worker must not outlive its supervisor."""

    def __init__(self, stop: StopFlag, parent: int) -> None:
        self._stop = stop
        self._parent = parent

    def is_set(self) -> bool:
        return self._stop.is_set() or os.getppid() != self._parent


def redirect_output(log_path: str) -> None:
    """Send this process's stdout and stderr (the function's logs and EMF) to a file."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


Job = tuple[Callable[..., None], tuple[Any, ...], str]
"""A worker: its target, the arguments before the shared ones, and its log file's stem."""


class WorkerPool(Lifecycle, Generic[Report]):
    """Starts the workers `jobs()` names and folds what they report; `with` stops them.

    Each target is called as `target(*args, stop, reports, log_path, supervisor_pid)`.
    """

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir  # None: workers share this process's stdout and stderr
        # spawn, not fork: the parent holds boto3 clients and threads that must not be copied
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._reports: mp.Queue[Report] = self._ctx.Queue()
        self.processes: list[mp.process.BaseProcess] = []

    @abstractmethod
    def jobs(self) -> Iterable[Job]:
        """The worker processes to start."""

    @abstractmethod
    def fold(self, report: Report) -> None:
        """Add one worker report to the totals."""

    def start(self) -> Self:
        try:
            for target, args, log_stem in self.jobs():
                log = str(self.log_dir / f"{log_stem}.log") if self.log_dir else None
                proc = self._ctx.Process(
                    target=target,
                    args=(*args, self._stop, self._reports, log, os.getpid()),
                    daemon=True,
                )
                proc.start()
                self.processes.append(proc)
        except BaseException:
            self.stop()
            raise
        return self

    def collect(self) -> None:
        """Fold the reports sent so far into the totals."""
        while True:
            try:
                report = self._reports.get_nowait()
            except Exception:
                return
            self.fold(report)

    def stop(self, timeout_s: float = 15.0) -> None:
        """Ask every worker to stop, kill those that do not within the timeout; idempotent."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for proc in self.processes:
            proc.join(max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
        self.collect()
