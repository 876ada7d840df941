"""Worker processes are supervised the way Lambda runs execution environments (issue 26, defect 3).

A poller or SNS delivery worker that dies (here: SIGKILL) is replaced by a fresh process that
imports the handler again, and the messages the dead one held come back after their visibility
timeout, so the queue drains instead of stalling. A handler that crashes at import is restarted
only within a bounded rate, then the function is marked failing with the reason, in the pool's
health (what `up` publishes for `eonce status`) and in its log.
"""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest

from exactly_once_ops.local_state import WorkerHealth
from local_aws.moto_server import REGION, MotoServer, aws_env
from local_aws.poller import FunctionBinding, Poller, queue_backlog
from local_aws.serve import _stats
from local_aws.sns_delivery import SubscriberBinding
from local_aws.sns_worker import SnsDelivery
from local_aws.workers import RestartPolicy
from tests.waiting import wait_until

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

BOUND_S = 90.0  # a bound on waiting for a condition, never a timing assertion

HOLDING_HANDLER = textwrap.dedent(
    '''
    """Holds the first "hold" message forever (until killed); marks every other one done."""
    import os, time
    from pathlib import Path

    OUT = Path(os.environ["OUT_DIR"])

    def handle(event, context):
        for record in event["Records"]:
            body = record["body"]
            if body == "hold" and not (OUT / "held").exists():
                (OUT / "held").write_text(str(os.getpid()))
                time.sleep(600)  # the test kills this process here
            (OUT / f"done-{body}").write_text(str(os.getpid()))
        return {"batchItemFailures": []}
    '''
)

CRASHING_HANDLER = 'raise RuntimeError("cannot start: SETTING is missing")\n'

PASSING_HANDLER = "def handle(event, context):\n    return None\n"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


def sqs_client(moto: MotoServer) -> SQSClient:
    return boto3.client(
        "sqs",
        endpoint_url=moto.endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def function(tmp_path: Path, code: str) -> Path:
    source = tmp_path / "function"
    source.mkdir()
    (source / "handler.py").write_text(code, encoding="utf-8")
    return source


def binding(source: Path, queue_url: str, out: Path) -> FunctionBinding:
    return FunctionBinding(
        function_name="orders-fn",
        source_dir=str(source),
        handler="handler.handle",
        environment={"OUT_DIR": str(out)},
        timeout_s=3,
        queue_url=queue_url,
        queue_arn="arn:aws:sqs:us-east-1:123456789012:supervised",
        consumer="Orders",
    )


def alive_pids(pool: Poller | SnsDelivery) -> set[int]:
    return {p.pid for p in pool.processes if p.is_alive() and p.pid is not None}


def test_a_killed_poller_worker_is_replaced_and_the_queue_drains(
    moto: MotoServer, tmp_path: Path
) -> None:
    sqs = sqs_client(moto)
    queue_url = sqs.create_queue(QueueName="supervised", Attributes={"VisibilityTimeout": "2"})[
        "QueueUrl"
    ]
    out = tmp_path / "out"
    out.mkdir()
    source = function(tmp_path, HOLDING_HANDLER)
    lines: list[str] = []
    poller = Poller([binding(source, queue_url, out)], aws_env(moto.endpoint), workers=1)
    poller.say = lines.append
    with poller:
        sqs.send_message(QueueUrl=queue_url, MessageBody="hold")
        held = out / "held"
        wait_until(held.exists, lambda: sorted(out.iterdir()), bound_s=BOUND_S)
        killed = int(held.read_text())
        assert alive_pids(poller) == {killed}  # the one worker holds the message
        for body in ("a", "b", "c"):
            sqs.send_message(QueueUrl=queue_url, MessageBody=body)
        os.kill(killed, signal.SIGKILL)

        done = {f"done-{body}" for body in ("hold", "a", "b", "c")}

        def drained() -> bool:
            names = {p.name for p in out.iterdir()}
            return done <= names and queue_backlog(sqs, queue_url) == 0

        wait_until(
            drained,
            lambda: (sorted(p.name for p in out.iterdir()), alive_pids(poller), lines),
            bound_s=BOUND_S,
        )
        # The held message came back after its visibility timeout, to a fresh environment.
        replacement = int((out / "done-hold").read_text())
        assert replacement != killed
        assert alive_pids(poller) == {replacement}
        health = poller.worker_health()
        assert health == {"Orders": WorkerHealth(workers=1, running=1, restarts=1)}
        assert health["Orders"].describe() == "1/1 running, restarted 1 time"
        assert _stats(poller, None).workers == health  # what `up` publishes for `status`
    assert any("killed by SIGKILL" in line and "replaced" in line for line in lines), lines


def test_a_handler_that_crashes_at_import_is_marked_failing_not_restarted_forever(
    moto: MotoServer, tmp_path: Path
) -> None:
    sqs = sqs_client(moto)
    queue_url = sqs.create_queue(QueueName="crashing")["QueueUrl"]
    source = function(tmp_path, CRASHING_HANDLER)
    lines: list[str] = []
    logs = tmp_path / "logs"
    poller = Poller(
        [binding(source, queue_url, tmp_path)], aws_env(moto.endpoint), workers=2, log_dir=logs
    )
    poller.say = lines.append
    poller.restart_policy = RestartPolicy(limit=3, window_s=600)
    with poller:

        def failing() -> WorkerHealth | None:
            health = poller.worker_health()["Orders"]
            return health if health.failing else None

        health = wait_until(failing, poller.worker_health, bound_s=BOUND_S)
        # Three restarts within the window were allowed; the fourth exit ended supervision.
        assert health.restarts == 3
        assert "4 worker exits within 600s" in health.failing
        assert "exit code 1" in health.failing
        assert health.describe().startswith("failing")
        starts = len(poller.started)
        assert starts == 2 + 3
        # The one worker still alive at the verdict (if any) also dies of the import error,
        # and is not replaced either.
        wait_until(lambda: not alive_pids(poller), lambda: alive_pids(poller), bound_s=BOUND_S)
        assert len(poller.started) == starts
        assert poller.worker_health()["Orders"].running == 0
    assert any("not restarted any more" in line for line in lines), lines
    crash_logs = " ".join(p.read_text() for p in logs.glob("*.log"))
    assert "cannot start: SETTING is missing" in crash_logs


def test_a_killed_sns_delivery_worker_is_replaced(moto: MotoServer, tmp_path: Path) -> None:
    sqs = sqs_client(moto)
    tap = sqs.create_queue(QueueName="supervised-tap")["QueueUrl"]
    source = function(tmp_path, PASSING_HANDLER)
    subscriber = SubscriberBinding(
        subscriber="SalesCounter",
        function_name="sales-fn",
        source_dir=str(source),
        handler="handler.handle",
        environment={},
        timeout_s=3,
        topic_arn="arn:aws:sns:us-east-1:123456789012:Sales",
        subscription_arn="arn:aws:sns:us-east-1:123456789012:Sales:x",
        tap_queue_url=tap,
        dead_letter_queue_url=tap,
    )
    with SnsDelivery([subscriber], aws_env(moto.endpoint), workers=1) as delivery:
        delivery.say = lambda line: None
        (first,) = wait_until(lambda: alive_pids(delivery), lambda: delivery.processes)
        os.kill(first, signal.SIGKILL)
        # Something for the replacement to do: a tap message that is no SNS envelope.
        sqs.send_message(QueueUrl=tap, MessageBody="not an envelope")
        wait_until(
            lambda: delivery.totals_by_subscriber()["SalesCounter"]["malformed"] == 1,
            lambda: (delivery.totals_by_subscriber(), alive_pids(delivery)),
            bound_s=BOUND_S,
        )
        (second,) = alive_pids(delivery)
        assert second != first
        assert delivery.worker_health()["SalesCounter"] == WorkerHealth(1, running=1, restarts=1)
