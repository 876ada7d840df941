"""The local stack's SNS → Lambda path: worker processes that deliver each topic message from a
subscriber's tap queue to its function's code, with Lambda's asynchronous retries.

moto delivers a topic's messages to subscribed queues but cannot run a Lambda function, so the
local stack subscribes a tap queue in the function's place (see sns_tap.py). A worker receives
one envelope at a time from it, hands the function the SNS event (`sns_delivery.deliver`), and
deletes the envelope once the delivery ended: handled, or dead-lettered after the retries.
A worker killed mid-delivery leaves the envelope to reappear, as SNS redelivers.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from exactly_once_ops.sns_events import parse_envelope
from local_aws.sns_delivery import DeliveryStats, StopFlag, SubscriberBinding, deliver
from local_aws.workers import FunctionWorkers, Handler, run_worker

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
    """A worker process (`run_worker`) whose every round receives one envelope from the tap
    (one SNS message, one asynchronous invocation) and delivers it."""
    hidden = visibility_timeout(binding)

    def poll(sqs: SQSClient, handler: Handler, region: str, stopping: StopFlag) -> None:
        got = sqs.receive_message(
            QueueUrl=binding.tap_queue_url,
            MaxNumberOfMessages=1,  # one SNS message, one asynchronous invocation
            WaitTimeSeconds=POLL_WAIT_S,
            VisibilityTimeout=hidden,
        ).get("Messages", [])
        for message in got:
            reports.put(deliver_tapped(sqs, binding, handler, dict(message), stopping, region))

    run_worker(binding, aws_environment, stop, log_path, parent, poll)


class SnsDelivery(FunctionWorkers[DeliveryStats, SubscriberBinding]):
    """Runs `workers` delivery processes per subscribed function until stopped; counts what
    they did per subscriber. `with SnsDelivery(...) as delivery:` stops them however it ends."""

    worker = staticmethod(subscriber_worker_main)

    def fold(self, report: DeliveryStats) -> None:
        total = self._totals.setdefault(report.subscriber, Counter())
        total.update(report.outcomes)
        for name in ("delivered", "attempts", "raised", "dead_lettered", "abandoned"):
            total[name] += getattr(report, name)
        total["malformed"] += report.malformed
        total["takeovers"] += report.takeovers

    def totals_by_subscriber(self) -> dict[str, Counter[str]]:
        """Outcome counts and the delivery's own counters, per subscriber."""
        return self.totals_by_label()
