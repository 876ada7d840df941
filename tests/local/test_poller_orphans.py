"""Poller workers stop by themselves when their poller is killed outright (SIGKILL)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from local_aws.moto_server import REGION, MotoServer
from local_aws.processes import descendants, wait_gone

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from local_aws.moto_server import aws_env
    from local_aws.poller import FunctionBinding, Poller

    endpoint, queue_url, source = sys.argv[1:4]
    binding = FunctionBinding(
        "orders-fn", source, "handler.handle",
        {"CONSUMER_SCOPE": "orders", "IDEMPOTENCY_TABLE": "t"}, 3,
        queue_url, "arn:aws:sqs:us-east-1:123456789012:orphans",
    )
    poller = Poller([binding], aws_env(endpoint), workers=2, log_dir=None).start()
    print("started", flush=True)
    time.sleep(300)
    """
)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


def test_workers_of_a_killed_poller_exit(moto: MotoServer) -> None:
    sqs = boto3.client(
        "sqs",
        endpoint_url=moto.endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    queue_url = sqs.create_queue(QueueName="orphans")["QueueUrl"]
    source = str(ROOT / "functions" / "orders")
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, moto.endpoint, queue_url, source],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        children = [p.id for p in descendants(proc.pid)]
        assert len(children) >= 2  # two workers (and multiprocessing's resource tracker)
        proc.send_signal(signal.SIGKILL)  # no handler, no `finally`: nobody sets their stop event
        proc.wait()
        assert wait_gone(children, 60) == []
    finally:
        proc.kill()
        proc.wait()
