"""Worker processes for the local stand-ins of Lambda's pollers: start, stop, fold their reports.

The SQS poller and the SNS delivery both run each deployed function in processes of its own
(the function's environment, a real kill on a crash), report what each invocation did over a
queue, and must never outlive the process that started them. This is that shared part: the
pool (`WorkerPool`, `FunctionWorkers`) and a worker's life up to its receive loop
(`run_worker`).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import traceback
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

from exactly_once_ops.handlers import load_handler
from local_aws import lock_off
from local_aws.lifecycle import Lifecycle
from local_aws.store_environment import apply_function_environment

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

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


class FunctionCode(Protocol):
    """What a worker needs of its binding to become the deployed function."""

    @property
    def function_name(self) -> str: ...
    @property
    def source_dir(self) -> str: ...
    @property
    def handler(self) -> str: ...  # "module.attribute"
    @property
    def environment(self) -> Mapping[str, str]: ...


Handler = Callable[[Any, Any], Any]
Poll = Callable[["SQSClient", Handler, str, StopFlag], None]
"""One round of a worker's loop: (its SQS client, the function's handler, the region, the stop
flag); it receives, invokes and reports."""


def run_worker(
    binding: FunctionCode,
    aws_environment: Mapping[str, str],
    stop: StopFlag,
    log_path: str | None,
    parent: int | None,
    poll: Poll,
) -> None:
    """A worker process's life: the function's environment, its handler, then `poll` until the
    supervisor asks it to stop or is gone.

    Ctrl-C in a terminal reaches the whole process group; the worker leaves stopping to its
    parent (which sets `stop`). An error in a round is printed and the loop goes on after a
    short pause, as Lambda's pollers and SNS keep delivering after errors.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopping = StopOrOrphaned(stop, os.getppid() if parent is None else parent)
    if log_path:
        redirect_output(log_path)
    os.environ.update(aws_environment)
    apply_function_environment(os.environ, binding.environment)
    os.environ.setdefault("AWS_LAMBDA_FUNCTION_NAME", binding.function_name)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    lock_off.install_if_enabled()  # the harness's self-test (EONCE_LOCK_OFF=1), never the layer's
    import boto3  # after the environment is set: the client reads its endpoint and region

    handler = load_handler(binding.source_dir, binding.handler)
    sqs = boto3.client("sqs")
    region = sqs.meta.region_name
    while not stopping.is_set():
        try:
            poll(sqs, handler, region, stopping)
        except Exception:
            traceback.print_exc()
            time.sleep(0.5)


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


class LabelledCode(FunctionCode, Protocol):
    @property
    def label(self) -> str: ...  # what the totals are counted under (the stack's id)


Binding = TypeVar("Binding", bound=LabelledCode)


class FunctionWorkers(WorkerPool[Report], Generic[Report, Binding]):
    """`workers` processes per binding, each `worker(binding, aws_environment, ...)` (which
    calls `run_worker`); `fold` adds the reports to counters per binding label."""

    worker: ClassVar[Callable[..., None]]
    """The process target, a module-level function (spawn pickles it by name)."""

    def __init__(
        self,
        bindings: list[Binding],
        aws_environment: dict[str, str],
        workers: int = 2,
        log_dir: Path | None = None,
    ) -> None:
        super().__init__(log_dir)
        self.bindings = bindings
        self.aws_environment = aws_environment
        self.workers = workers
        self._totals: dict[str, Counter[str]] = {b.label: Counter() for b in bindings}

    def jobs(self) -> Iterable[Job]:
        for binding in self.bindings:
            for n in range(self.workers):
                args = (binding, self.aws_environment)
                yield type(self).worker, args, f"{binding.function_name}-{n}"

    def totals_by_label(self) -> dict[str, Counter[str]]:
        """Each label's counters so far (a copy)."""
        self.collect()
        return {label: Counter(total) for label, total in self._totals.items()}
