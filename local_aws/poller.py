"""A local stand-in for Lambda's SQS event source mapping.

Like the real poller it long-polls with the mapping's batch size and batching window, hands the
handler a real-shaped event and a context carrying the function's timeout, deletes only the
successes (DeleteMessageBatch, checking `Failed`) and leaves failures to reappear after the
visibility timeout, so SQS's own redrive moves them to the DLQ after maxReceiveCount.

Workers are separate processes (each with its function's environment), so functions are as
isolated as on Lambda and a crash is a real kill.
"""

from __future__ import annotations

import base64
import hashlib
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactly_once_ops.lambda_context import LocalLambdaContext
from exactly_once_ops.status import queue_depth
from local_aws.workers import FunctionWorkers, Handler, StopFlag, run_worker
from local_aws.workers import redirect_output as redirect_output  # fault_injection's import

if TYPE_CHECKING:
    import multiprocessing as mp
    from multiprocessing.synchronize import Event as EventType

    from mypy_boto3_sqs import SQSClient

POLL_WAIT_S = 1  # short long-polls, so workers notice a stop request quickly


@dataclass(frozen=True)
class FunctionBinding:
    """Everything a worker needs to run one deployed function against its queue."""

    function_name: str
    source_dir: str
    handler: str  # "module.attribute"
    environment: dict[str, str]
    timeout_s: int
    queue_url: str
    queue_arn: str
    batch_size: int = 10
    batching_window_s: int = 0
    consumer: str = ""  # the stack's consumer id (Orders); the function name when not known

    @property
    def label(self) -> str:
        return self.consumer or self.function_name


def describe_bindings(bindings: Iterable[FunctionBinding]) -> str:
    """One phrase per function for start-up lines: "Orders: batch 10, timeout 3s; ..."."""
    return "; ".join(f"{b.label}: batch {b.batch_size}, timeout {b.timeout_s}s" for b in bindings)


@dataclass
class BatchStats:
    """What one worker saw in one invocation: sent to the supervisor over a queue."""

    function_name: str
    received: int = 0
    deleted: int = 0
    delete_failures: int = 0
    handler_crashes: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    takeovers: int = 0


def to_lambda_record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """A received SQS message in the shape Lambda's event source mapping delivers it."""
    attributes: dict[str, Any] = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        entry: dict[str, Any] = {"stringListValues": [], "binaryListValues": []}
        if "BinaryValue" in value:
            entry["binaryValue"] = base64.b64encode(value["BinaryValue"]).decode("ascii")
        else:
            entry["stringValue"] = value.get("StringValue", "")
        entry["dataType"] = value.get("DataType", "String")
        attributes[name] = entry
    body = str(message.get("Body", ""))
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": body,
        "attributes": dict(message.get("Attributes") or {}),
        "messageAttributes": attributes,
        "md5OfBody": message.get("MD5OfBody")
        or hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


def receive_batch(
    sqs: SQSClient, binding: FunctionBinding, stop: StopFlag | None = None
) -> list[dict[str, Any]]:
    """Gather up to batch_size messages, waiting at most the batching window once one arrived."""
    messages: list[dict[str, Any]] = []
    window_end: float | None = None
    while len(messages) < binding.batch_size:
        if stop is not None and stop.is_set():
            break
        if window_end is None:
            wait = POLL_WAIT_S
        else:
            remaining = window_end - time.monotonic()
            if remaining <= 0:
                break
            wait = min(POLL_WAIT_S, max(0, int(remaining)))
        got = sqs.receive_message(
            QueueUrl=binding.queue_url,
            MaxNumberOfMessages=min(10, binding.batch_size - len(messages)),
            WaitTimeSeconds=wait,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        messages += [dict(m) for m in got]
        if not messages:
            if stop is None:
                break
            continue
        if binding.batching_window_s <= 0:
            break
        if window_end is None:
            window_end = time.monotonic() + binding.batching_window_s
        if not got:
            break
    return messages


def failed_ids(response: Any, batch_ids: set[str]) -> set[str]:
    """The message ids to leave in the queue, read the way Lambda reads the response.

    A malformed response, or an identifier that is empty or not in the batch, fails the whole
    batch, exactly as Lambda does.
    """
    if response is None:
        return set()
    if not isinstance(response, dict) or not isinstance(
        response.get("batchItemFailures", []), list
    ):
        return set(batch_ids)
    failed: set[str] = set()
    for item in response.get("batchItemFailures", []):
        ident = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not isinstance(ident, str) or ident not in batch_ids:
            return set(batch_ids)
        failed.add(ident)
    return failed


def delete_successes(sqs: SQSClient, queue_url: str, messages: Iterable[dict[str, Any]]) -> int:
    """Delete in batches of ten; returns how many deletes SQS reported as failed."""
    pending = list(messages)
    failures = 0
    for start in range(0, len(pending), 10):
        chunk = pending[start : start + 10]
        response = sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)
            ],
        )
        failures += len(response.get("Failed", []))
    return failures


def invoke_once(
    sqs: SQSClient,
    binding: FunctionBinding,
    handler: Callable[[Any, Any], Any],
    messages: list[dict[str, Any]],
    region: str,
) -> BatchStats:
    """One invocation: event in, partial-batch response out, successes deleted."""
    stats = BatchStats(binding.function_name, received=len(messages))
    event = {"Records": [to_lambda_record(m, binding.queue_arn, region) for m in messages]}
    context = LocalLambdaContext(binding.function_name, timeout_s=binding.timeout_s)
    ids = {m["MessageId"] for m in messages}
    try:
        response = handler(event, context)
        failed = failed_ids(response, ids)
    except Exception:
        traceback.print_exc()
        stats.handler_crashes += 1
        failed = ids  # a raised error retries the whole batch
    for result in getattr(handler, "last_results", []) or []:
        stats.outcomes[str(result.outcome)] += 1
        stats.takeovers += int(bool(result.takeover))
    successes = [m for m in messages if m["MessageId"] not in failed]
    stats.delete_failures = delete_successes(sqs, binding.queue_url, successes)
    stats.deleted = len(successes) - stats.delete_failures
    return stats


def worker_main(
    binding: FunctionBinding,
    aws_environment: dict[str, str],
    stop: EventType,
    reports: mp.Queue[BatchStats],
    log_path: str | None = None,
    parent: int | None = None,
) -> None:
    """A worker process (`run_worker`) whose every round is one invocation: a batch received
    within the mapping's window, handed to the handler, its successes deleted."""

    def poll(sqs: SQSClient, handler: Handler, region: str, stopping: StopFlag) -> None:
        messages = receive_batch(sqs, binding, stopping)
        if messages:
            reports.put(invoke_once(sqs, binding, handler, messages, region))

    run_worker(binding, aws_environment, stop, log_path, parent, poll)


class Poller(FunctionWorkers[BatchStats, FunctionBinding]):
    """Runs `workers` processes per function until stopped; counts their outcomes per consumer.

    `with Poller(...) as poller:` stops the workers however the block ends.
    """

    worker = staticmethod(worker_main)

    def __init__(
        self,
        bindings: list[FunctionBinding],
        aws_environment: dict[str, str],
        workers: int = 2,
        log_dir: Path | None = None,
    ) -> None:
        super().__init__(bindings, aws_environment, workers, log_dir)
        self._labels = {b.function_name: b.label for b in bindings}

    def fold(self, report: BatchStats) -> None:
        total = self._totals.setdefault(
            self._labels.get(report.function_name, report.function_name), Counter()
        )
        total.update(report.outcomes)
        total["received"] += report.received
        total["deleted"] += report.deleted
        total["delete_failures"] += report.delete_failures
        total["handler_crashes"] += report.handler_crashes
        total["takeovers"] += report.takeovers

    def totals_by_consumer(self) -> dict[str, Counter[str]]:
        """Outcome counts and the poller's own counters, per consumer."""
        return self.totals_by_label()

    def totals(self) -> Counter[str]:
        """Outcome counts over all consumers, plus the poller's own counters."""
        total: Counter[str] = Counter()
        for counts in self.totals_by_consumer().values():
            total.update(counts)
        return total


def queue_backlog(sqs: SQSClient, queue_url: str) -> int:
    """Visible, in flight and delayed: everything the consumers still have to finish."""
    return queue_depth(sqs, queue_url).total


def wait_until_drained(
    sqs: SQSClient,
    queue_urls: list[str],
    timeout_s: float,
    settle_s: float = 2.0,
    on_tick: Callable[[int], None] | None = None,
) -> bool:
    """True once every queue has held no message (visible, in flight or delayed) for settle_s."""
    deadline = time.monotonic() + timeout_s
    empty_since: float | None = None
    while time.monotonic() < deadline:
        backlog = sum(queue_backlog(sqs, url) for url in queue_urls)
        if on_tick is not None:
            on_tick(backlog)
        if backlog == 0:
            empty_since = empty_since or time.monotonic()
            if time.monotonic() - empty_since >= settle_s:
                return True
        else:
            empty_since = None
        time.sleep(0.5)
    return False
