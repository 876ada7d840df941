"""A dead worker whose replacement cannot be spawned at once (a fork limit, no file descriptors
left) counts as one exit, not one per retry (issue 26, defect 3).

The supervisor added the dead worker's exit to the restart window at every round until a spawn
succeeded, so a transient spawn failure looked like a crash loop: the function was marked
failing ("2 worker exits within 600s") after one death, and its workers were never replaced.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterable
from multiprocessing.process import BaseProcess
from typing import Any

import pytest

from exactly_once_ops.local_state import WorkerHealth
from local_aws.workers import Job, RestartPolicy, WorkerPool
from tests.waiting import wait_until


def idle(stop: Any, reports: Any, log_path: str | None, parent: int) -> None:
    """A worker that does nothing until asked to stop (spawn pickles it by name)."""
    stop.wait(600)


class IdlePool(WorkerPool[int]):
    def jobs(self) -> Iterable[Job]:
        yield idle, (), "idle-0", "Idle"

    def fold(self, report: int) -> None:
        return None


def test_a_failed_respawn_is_retried_without_counting_the_exit_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = IdlePool()
    pool.restart_policy = RestartPolicy(limit=1, window_s=600)  # a second exit would be "failing"
    lines: list[str] = []
    pool.say = lines.append
    with pool:
        (worker,) = pool.processes
        spawn = pool._spawn
        failures = [OSError(errno.EAGAIN, "Resource temporarily unavailable")] * 3

        def flaky(job: Job) -> BaseProcess:
            if failures:
                raise failures.pop()
            return spawn(job)

        monkeypatch.setattr(pool, "_spawn", flaky)
        worker.kill()  # the supervisor reaps it

        def settled() -> WorkerHealth | None:
            with contextlib.suppress(OSError):  # the supervisor checks too; either may fail
                pool.check()
            health = pool.worker_health()["Idle"]
            return health if health.failing or health.restarts else None

        health = wait_until(settled, lambda: (failures, lines, pool.worker_health()))
        assert health.failing == "", lines
        assert health.restarts == 1
        assert failures == []
        wait_until(lambda: pool.worker_health()["Idle"].running == 1, lambda: pool.processes)
