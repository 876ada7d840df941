"""A consumer that cannot start stops the run instead of hanging it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fault_injection.supervisor import BrokenPool, WorkerPool
from fault_injection.worker import WorkerSpec
from local_aws.poller import FunctionBinding
from tests.waiting import wait_until


def test_workers_that_keep_exiting_break_the_pool(tmp_path: Path) -> None:
    binding = FunctionBinding(
        function_name="broken",
        source_dir=str(tmp_path),
        handler="handler.handle",
        environment={},
        timeout_s=2,
        queue_url="http://localhost:1/123456789012/never-polled",
        queue_arn="arn:aws:sqs:us-east-1:123456789012:never-polled",
    )
    spec = WorkerSpec(
        binding=binding,
        environment={"AWS_DEFAULT_REGION": "us-east-1"},
        handler="fault_injection.no_such_module:handle",
        throttle_rate=0.0,
        delete_failure_rate=0.0,
        seed=1,
        log_dir=str(tmp_path),
    )
    pool = WorkerPool(spec, size=2, pause_s=1.0).start()
    try:
        wait_until(
            lambda: pool.stats.exited_otherwise >= WorkerPool.MAX_UNEXPECTED_EXITS,
            lambda: pool.stats,
        )
        with pytest.raises(BrokenPool, match="exited without being killed"):
            pool.raise_if_broken()
    finally:
        pool.stop(timeout_s=10)
    assert pool.stats.killed == 0
    assert (
        "No module named 'fault_injection.no_such_module'"
        in (tmp_path / "worker-0.log").read_text()
    )
