"""Worker processes for the local stand-ins of Lambda's pollers: start, stop, fold their reports.

The SQS poller and the SNS delivery both run each deployed function in processes of its own
(the function's environment, a real kill on a crash), report what each invocation did over a
queue, and must never outlive the process that started them. This is that shared part: the
pool (`WorkerPool`, `FunctionWorkers`) and a worker's life up to its receive loop
(`run_worker`).

The pool supervises its workers as Lambda runs execution environments: one that dies (killed,
crashed, exited) is replaced by a fresh process that imports the handler again, and the
messages it held come back after their visibility timeout, as SQS returns them. Replacements
are bounded (`RestartPolicy`): a handler that crashes at import would otherwise spin, so
past the bound the function is marked failing, with the reason, and left alone.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
from abc import abstractmethod
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

from exactly_once_ops.handlers import load_handler
from exactly_once_ops.local_state import WorkerHealth
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


Job = tuple[Callable[..., None], tuple[Any, ...], str, str]
"""A worker: its target, the arguments before the shared ones, its log file's stem, and the
label its health is kept under (the function's consumer or subscriber)."""

SUPERVISE_INTERVAL_S = 0.2  # how often the supervisor looks for dead workers


@dataclass(frozen=True)
class RestartPolicy:
    """How many dead workers of one function are replaced within `window_s` seconds; the next
    exit within the window marks the function failing, and nothing replaces its workers any
    more (a handler that crashes at import would otherwise restart forever)."""

    limit: int = 5
    window_s: float = 60.0


def describe_exit(exitcode: int | None) -> str:
    """'killed by SIGKILL', 'exit code 1'."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"


def log_line(message: str) -> None:
    """The pool's own lines (a replacement, a function given up), stamped as `up` stamps its."""
    stamp = datetime.now(UTC).strftime("%H:%M:%S")
    print(f"{stamp} {message}", flush=True)


class WorkerPool(Lifecycle, Generic[Report]):
    """Starts the workers `jobs()` names, replaces those that die, and folds what they report;
    `with` stops them.

    Each target is called as `target(*args, stop, reports, log_path, supervisor_pid)`.
    A supervisor thread checks the workers every SUPERVISE_INTERVAL_S (see the module's
    docstring); `say` gets a line for each replacement and for a function given up.
    """

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir  # None: workers share this process's stdout and stderr
        # spawn, not fork: the parent holds boto3 clients and threads that must not be copied
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._reports: mp.Queue[Report] = self._ctx.Queue()
        self.processes: list[mp.process.BaseProcess] = []  # one per job, the latest started
        self.started: list[int] = []  # every worker pid ever started, replacements included
        self.restart_policy = RestartPolicy()
        self.say: Callable[[str], None] = log_line
        self._jobs: list[Job] = []
        self._health: dict[str, WorkerHealth] = {}
        self._exits: dict[str, deque[float]] = {}
        # dead workers (by id) whose exit is counted but not replaced yet: a failed spawn is
        # retried at the next round without counting the same exit again
        self._counted: set[int] = set()
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._supervisor: threading.Thread | None = None

    @abstractmethod
    def jobs(self) -> Iterable[Job]:
        """The worker processes to start."""

    @abstractmethod
    def fold(self, report: Report) -> None:
        """Add one worker report to the totals."""

    def start(self) -> Self:
        try:
            for job in self.jobs():
                label = job[3]
                health = self._health.get(label, WorkerHealth(workers=0))
                self._health[label] = replace(health, workers=health.workers + 1)
                self._jobs.append(job)
                self.processes.append(self._spawn(job))
        except BaseException:
            self.stop()
            raise
        self._supervisor = threading.Thread(
            target=self._supervise, name=f"{type(self).__name__}-supervisor", daemon=True
        )
        self._supervisor.start()
        return self

    def _spawn(self, job: Job) -> mp.process.BaseProcess:
        target, args, log_stem, _ = job
        log = str(self.log_dir / f"{log_stem}.log") if self.log_dir else None
        proc = self._ctx.Process(
            target=target,
            args=(*args, self._stop, self._reports, log, os.getpid()),
            daemon=True,
        )
        proc.start()
        if proc.pid is not None:
            self.started.append(proc.pid)
        return proc

    def _supervise(self) -> None:
        while not self._halt.wait(SUPERVISE_INTERVAL_S):
            try:
                self.check()
            except Exception:  # a failed spawn: try again at the next round
                traceback.print_exc()

    def check(self) -> None:
        """Replace each worker that died while not asked to stop, within the restart policy."""
        with self._lock:
            for index, proc in enumerate(self.processes):
                if self._stop.is_set():
                    return
                label, stem = self._jobs[index][3], self._jobs[index][2]
                if proc.is_alive() or self._health[label].failing:
                    continue  # a failing function's dead workers stay dead
                proc.join()
                self._replace(index, proc, label, stem)

    def _replace(self, index: int, proc: mp.process.BaseProcess, label: str, stem: str) -> None:
        policy = self.restart_policy
        now = time.monotonic()
        exits = self._exits.setdefault(label, deque())
        if id(proc) not in self._counted:
            self._counted.add(id(proc))
            exits.append(now)
        while exits and now - exits[0] > policy.window_s:
            exits.popleft()
        died = describe_exit(proc.exitcode)
        health = self._health[label]
        if len(exits) > policy.limit:
            log = f"; its log: {self.log_dir / f'{stem}.log'}" if self.log_dir else ""
            reason = (
                f"{len(exits)} worker exits within {policy.window_s:g}s, the last {died}"
                f"{log}; not restarted any more"
            )
            self._health[label] = replace(health, failing=reason)
            self.say(
                f"{label}: {reason}, as Lambda marks a function whose environments keep "
                "failing (fix it, then `eonce down` and `up` again)"
            )
            return
        self.processes[index] = self._spawn(self._jobs[index])
        self._counted.discard(id(proc))
        self._health[label] = replace(health, restarts=health.restarts + 1)
        self.say(
            f"{label}: worker {stem} (pid {proc.pid}) {died}; replaced by a fresh one "
            f"(pid {self.processes[index].pid}), restart {health.restarts + 1}"
        )

    def worker_health(self) -> dict[str, WorkerHealth]:
        """Each label's workers now: how many run, how many were replaced, whether failing."""
        with self._lock:
            alive: Counter[str] = Counter(
                job[3]
                for job, proc in zip(self._jobs, self.processes, strict=True)
                if proc.is_alive()
            )
            return {
                label: replace(health, running=alive[label])
                for label, health in self._health.items()
            }

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
        self._halt.set()
        if self._supervisor is not None:
            self._supervisor.join()
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
                yield type(self).worker, args, f"{binding.function_name}-{n}", binding.label

    def totals_by_label(self) -> dict[str, Counter[str]]:
        """Each label's counters so far (a copy)."""
        self.collect()
        return {label: Counter(total) for label, total in self._totals.items()}
