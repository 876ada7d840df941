"""Keep a pool of chaos workers running: restart the killed, wake the paused.

A worker that SIGSTOPs itself is found by its process state (`T` in /proc/PID/stat) and gets
SIGCONT after `pause_s`, well past its lease and the queue's visibility timeout, so the
message is redelivered and taken over while the worker is frozen: when it wakes it is a
zombie. Only this pool's own children are ever signalled, by pid. The wake leaves a marker in
the run's event directory first: the paused worker holds its turn to fire faults until it sees
it (see fault_injection.injection).
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol

from fault_injection import injection
from fault_injection.events import EVENT_DIR_ENV
from fault_injection.worker import worker_main


class Spec(Protocol):
    """What the pool needs of a worker's spec (the queue's WorkerSpec, the stream's)."""

    @property
    def log_dir(self) -> str: ...

    @property
    def environment(self) -> dict[str, str]: ...


def process_state(pid: int) -> str | None:
    """The one-letter state from /proc (R, S, T, Z, ...), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split(" ", 1)[0]


@dataclass
class PoolStats:
    started: int = 0
    killed: int = 0  # exited by SIGKILL (the injected crashes)
    exited_otherwise: int = 0  # anything else is a harness or consumer bug worth a look
    killed_at_stop: int = 0  # did not stop within the timeout
    paused: int = 0
    paused_s: list[float] = field(default_factory=list)
    killed_pids: set[int] = field(default_factory=set)
    paused_pids: set[int] = field(default_factory=set)


class BrokenPool(RuntimeError):
    """Workers keep exiting on their own: the consumer cannot even start (an import error...)."""


class WorkerPool:
    MAX_UNEXPECTED_EXITS = 5

    def __init__(
        self,
        spec: Spec,
        size: int,
        pause_s: float,
        target: Callable[..., None] = worker_main,  # (spec, index, generation, stop flag)
    ) -> None:
        self.spec = spec
        self.target = target
        self.size = size
        self.pause_s = pause_s
        self.stats = PoolStats()
        self._ctx = mp.get_context("spawn")
        self._stop: Any = self._ctx.RawValue("b", 0)
        self._slots: list[BaseProcess | None] = [None] * size
        self._generation = [0] * size
        self._stopped_at: dict[int, float] = {}
        self._halt = threading.Event()
        self._monitor = threading.Thread(target=self._watch, name="chaos-pool", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> WorkerPool:
        for index in range(self.size):
            self._spawn(index)
        self._monitor.start()
        return self

    def raise_if_broken(self) -> None:
        if self.stats.exited_otherwise >= self.MAX_UNEXPECTED_EXITS:
            raise BrokenPool(
                f"{self.stats.exited_otherwise} workers exited without being killed; "
                f"see the worker logs in {self.spec.log_dir}"
            )

    @property
    def frozen(self) -> int:
        """Workers stopped right now (their batches are in flight until they wake)."""
        with self._lock:
            return len(self._stopped_at)

    def _spawn(self, index: int) -> None:
        proc = self._ctx.Process(
            target=self.target,
            args=(self.spec, index, self._generation[index], self._stop),
            daemon=True,
        )
        proc.start()
        self._generation[index] += 1
        self._slots[index] = proc
        self.stats.started += 1

    def _watch(self) -> None:
        while not self._halt.wait(0.1):
            self.check()

    def check(self, restart: bool = True) -> None:
        """Reap and restart dead workers; wake those frozen for `pause_s`."""
        with self._lock:
            now = time.monotonic()
            for index, proc in enumerate(self._slots):
                if proc is None or proc.pid is None:
                    continue
                if not proc.is_alive():
                    self._reap(index, proc, restart)
                    continue
                state = process_state(proc.pid)
                if state == "T":
                    since = self._stopped_at.setdefault(proc.pid, now)
                    if now - since >= self.pause_s:
                        self._wake(proc.pid, now - since)
                elif proc.pid in self._stopped_at:  # woken by someone else
                    self._stopped_at.pop(proc.pid)

    def _reap(self, index: int, proc: BaseProcess, restart: bool) -> None:
        proc.join()
        if proc.exitcode == -signal.SIGKILL:
            self.stats.killed += 1
            if proc.pid is not None:
                self.stats.killed_pids.add(proc.pid)
        elif proc.exitcode != 0 or not self._stop.value:
            self.stats.exited_otherwise += 1
        self._slots[index] = None
        broken = self.stats.exited_otherwise >= self.MAX_UNEXPECTED_EXITS
        if restart and not self._stop.value and not broken:
            self._spawn(index)

    def _wake(self, pid: int, paused_for: float) -> None:
        injection.wake(pid, self.spec.environment.get(EVENT_DIR_ENV))
        self._stopped_at.pop(pid, None)
        self.stats.paused += 1
        self.stats.paused_s.append(paused_for)
        self.stats.paused_pids.add(pid)

    def stop(self, timeout_s: float = 60.0) -> None:
        """Let frozen workers finish their pause, ask everyone to stop, then reap them.

        Zombies must wake and finish their batch before the books are closed: their late
        writes are exactly what the run is checking.
        """
        deadline = time.monotonic() + self.pause_s + 5
        while self.frozen and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop.value = 1
        self._halt.set()
        self._monitor.join()
        end = time.monotonic() + timeout_s
        for index, proc in enumerate(self._slots):
            if proc is None:
                continue
            if proc.pid is not None and process_state(proc.pid) == "T":
                # It froze after the wait above (its last batch was in flight when the run
                # ended): it still sleeps its whole pause, as a zombie does, and is counted.
                since = self._stopped_at.get(proc.pid, time.monotonic())
                time.sleep(max(0.0, since + self.pause_s - time.monotonic()))
                self._wake(proc.pid, time.monotonic() - since)
            proc.join(max(0.1, end - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()
                self.stats.killed_at_stop += 1
                self._slots[index] = None
            else:
                self._reap(index, proc, restart=False)
