"""The local stack's SNS → Lambda path: worker processes that deliver each topic message from a
subscriber's tap queue to its function's code, with Lambda's asynchronous retries.

moto delivers a topic's messages to subscribed queues but cannot run a Lambda function, so the
local stack subscribes a tap queue in the function's place (see sns_tap.py). A worker receives
one envelope at a time from it, hands the function the SNS event (`sns_delivery.deliver`), and
deletes the envelope once the delivery ended: handled, or dead-lettered after the retries.
A worker killed mid-delivery leaves the envelope to reappear, as SNS redelivers.
"""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactly_once_ops.handlers import load_handler
from exactly_once_ops.sns_events import parse_envelope
from local_aws.sns_delivery import DeliveryStats, StopFlag, SubscriberBinding, deliver
from local_aws.workers import Job, StopOrOrphaned, WorkerPool, redirect_output

if TYPE_CHECKING:
    import multiprocessing as mp
    from multiprocessing.synchronize import Event as EventType

    from mypy_boto3_sqs import SQSClient

POLL_WAIT_S = 1  # short long-polls, so workers notice a stop request quickly
VISIBILITY_MARGIN_S = 30


def visibility_timeout(binding: SubscriberBinding) -> int:
    """Long enough for every attempt and every wait, so no other worker takes the envelope
    while its delivery is still retrying."""
    retry = binding.retry
    waits = sum(retry.delay(n) for n in range(retry.retries))
    return int((retry.retries + 1) * binding.timeout_s + waits) + VISIBILITY_MARGIN_S


def deliver_tapped(
    sqs: SQSClient,
    binding: SubscriberBinding,
    handler: Any,
    message: dict[str, Any],
    stop: StopFlag,
    region: str,
) -> DeliveryStats:
    """Deliver one tap message; delete it unless the delivery was abandoned by a stop."""
    envelope = parse_envelope(str(message.get("Body", "")))
    if envelope is None:
        print(f"not an SNS envelope, dropped: {str(message.get('Body'))[:200]!r}", flush=True)
        stats = DeliveryStats(binding.label, malformed=1)
    else:
        stats = deliver(sqs, binding, handler, envelope, stop=stop, region=region)
    if not stats.abandoned:
        sqs.delete_message(QueueUrl=binding.tap_queue_url, ReceiptHandle=message["ReceiptHandle"])
    return stats


def subscriber_worker_main(
    binding: SubscriberBinding,
    aws_environment: dict[str, str],
    stop: EventType,
    reports: mp.Queue[DeliveryStats],
    log_path: str | None = None,
    parent: int | None = None,
) -> None:
    """A worker process: the function's environment, its handler, and the tap's receive loop.

    Ctrl-C reaches the whole process group; the worker leaves stopping to its parent, and stops
    by itself if that parent is gone.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stopping = StopOrOrphaned(stop, os.getppid() if parent is None else parent)
    if log_path:
        redirect_output(log_path)
    os.environ.update(aws_environment)
    os.environ.update(binding.environment)
    os.environ.setdefault("AWS_LAMBDA_FUNCTION_NAME", binding.function_name)
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    import boto3

    handler = load_handler(binding.source_dir, binding.handler)
    sqs = boto3.client("sqs")
    region = sqs.meta.region_name
    hidden = visibility_timeout(binding)
    while not stopping.is_set():
        try:
            got = sqs.receive_message(
                QueueUrl=binding.tap_queue_url,
                MaxNumberOfMessages=1,  # one SNS message, one asynchronous invocation
                WaitTimeSeconds=POLL_WAIT_S,
                VisibilityTimeout=hidden,
            ).get("Messages", [])
            for message in got:
                reports.put(deliver_tapped(sqs, binding, handler, dict(message), stopping, region))
        except Exception:  # keep receiving, as SNS keeps delivering after errors
            traceback.print_exc()
            time.sleep(0.5)


class SnsDelivery(WorkerPool[DeliveryStats]):
    """Runs `workers` delivery processes per subscribed function until stopped; counts what
    they did per subscriber. `with SnsDelivery(...) as delivery:` stops them however it ends."""

    def __init__(
        self,
        bindings: list[SubscriberBinding],
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
                yield subscriber_worker_main, args, f"{binding.function_name}-{n}"

    def fold(self, report: DeliveryStats) -> None:
        total = self._totals.setdefault(report.subscriber, Counter())
        total.update(report.outcomes)
        for name in ("delivered", "attempts", "raised", "dead_lettered", "abandoned"):
            total[name] += getattr(report, name)
        total["malformed"] += report.malformed
        total["takeovers"] += report.takeovers

    def totals_by_subscriber(self) -> dict[str, Counter[str]]:
        """Outcome counts and the delivery's own counters, per subscriber."""
        self.collect()
        return {label: Counter(total) for label, total in self._totals.items()}
