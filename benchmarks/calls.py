"""AWS API calls per record for each outcome: new, duplicate (redelivered) and in progress.

Each outcome is checked, not assumed: the business function must run once per new record, never
for a duplicate, and an in-progress record must be reported failed so that SQS redelivers it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from benchmarks.business import make_work
from benchmarks.consumers import Consumer
from benchmarks.errors import BenchmarkInvalid
from benchmarks.instrument import CallCounter
from benchmarks.rig import Rig, Variant
from benchmarks.settings import invocation_context
from benchmarks.sqs_events import new_batch, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

HOLD_TIMEOUT_S = 30.0
MOTO_ACCOUNT = "123456789012"  # moto's default account, part of its queue ARNs


class Case(StrEnum):
    NEW = "new"
    DUPLICATE = "duplicate"
    IN_PROGRESS = "in progress"


@dataclass(frozen=True)
class CallCounts:
    variant: Variant
    case: Case
    records: int
    calls: dict[str, int]  # "dynamodb.UpdateItem" -> count, over all `records`

    def per_record(self, service: str) -> float:
        prefix = f"{service}."
        return sum(n for op, n in self.calls.items() if op.startswith(prefix)) / self.records

    def per_batch(self, service: str | None = None) -> int:
        """Requests the whole batch of `records` cost (of one service, or of all): each case is
        one invocation with one batch, so this is what the batch paid."""
        prefix = f"{service}." if service else ""
        return sum(n for op, n in self.calls.items() if op.startswith(prefix))

    def breakdown(self) -> str:
        """E.g. "PutItem 1 + UpdateItem 1" per record."""
        parts = [
            f"{op.split('.', 1)[1]} {n / self.records:g}" for op, n in sorted(self.calls.items())
        ]
        return " + ".join(parts) or "none"

    def batch_breakdown(self) -> str:
        """E.g. "PutItem 10 + UpdateItem 10" for the whole batch."""
        parts = [f"{op.split('.', 1)[1]} {n}" for op, n in sorted(self.calls.items())]
        return " + ".join(parts) or "none"


class CountingWork:
    """The business function, counting its runs so each path can be verified."""

    def __init__(self, before: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._before = before
        self.runs = 0
        self._work = make_work(0)

    def __call__(self, order: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.runs += 1
        if self._before is not None:
            self._before()
        return self._work(order)


def _gate(inside: threading.Event, release: threading.Event) -> Callable[[], None]:
    """Signal that the holder is inside its business function, then wait to be let go."""

    def hold() -> None:
        inside.set()
        release.wait(HOLD_TIMEOUT_S)

    return hold


def _failures(response: dict[str, Any]) -> int:
    return len(response.get("batchItemFailures", []))


def new_and_duplicate(rig: Rig, variant: Variant, records: int) -> list[CallCounts]:
    counter = CallCounter()
    work = CountingWork()
    consumer = rig.consumer(variant, work, counter)
    batch = new_batch(records)

    response = consumer(batch, invocation_context())
    if _failures(response) or work.runs != records:
        raise BenchmarkInvalid(f"{variant}: new batch misbehaved: {response}, runs={work.runs}")
    new = CallCounts(variant, Case.NEW, records, counter.snapshot())

    counter.reset()
    response = consumer(batch, invocation_context())  # the same messages, redelivered
    if _failures(response) or work.runs != records:
        raise BenchmarkInvalid(f"{variant}: duplicates misbehaved: {response}, runs={work.runs}")
    return [new, CallCounts(variant, Case.DUPLICATE, records, counter.snapshot())]


def _received(sqs: SQSClient, queue_url: str, count: int) -> list[str]:
    """Real receipt handles, so the layer's ChangeMessageVisibility is a call that succeeds."""
    for _ in range(count):
        sqs.send_message(QueueUrl=queue_url, MessageBody="{}")
    handles: list[str] = []
    while len(handles) < count:
        messages = sqs.receive_message(
            QueueUrl=queue_url, MaxNumberOfMessages=min(10, count - len(handles))
        ).get("Messages", [])
        handles += [m["ReceiptHandle"] for m in messages]
    return handles


def in_progress(rig: Rig, variant: Variant, records: int) -> CallCounts:
    """Hold `records` keys in other "execution environments", then deliver them again.

    Each holder is a separate consumer (its own clients, uncounted) blocked inside the business
    function; the probe consumer's calls are the ones counted.
    """
    sqs: SQSClient = rig.client("sqs")
    name = f"bench-{uuid.uuid4().hex[:10]}"
    queue_url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = f"arn:aws:sqs:us-east-1:{MOTO_ACCOUNT}:{name}"

    release = threading.Event()
    order_ids = [f"order-{uuid.uuid4().hex}" for _ in range(records)]
    threads: list[threading.Thread] = []
    entered: list[threading.Event] = []
    try:
        for order_id in order_ids:
            inside = threading.Event()
            entered.append(inside)
            holder: Consumer = rig.consumer(variant, CountingWork(before=_gate(inside, release)))
            held = {"Records": [sqs_record(order_id)]}
            thread = threading.Thread(
                target=holder,
                args=(held, invocation_context()),
                daemon=True,
            )
            thread.start()
            threads.append(thread)
        for inside in entered:
            if not inside.wait(HOLD_TIMEOUT_S):
                raise BenchmarkInvalid(f"{variant}: a holder never reached its business function")

        counter = CallCounter()
        work = CountingWork()
        probe = rig.consumer(variant, work, counter)
        handles = _received(sqs, queue_url, records)
        batch = {
            "Records": [
                sqs_record(order_id, receipt_handle=handle, arn=arn)
                for order_id, handle in zip(order_ids, handles, strict=True)
            ]
        }
        response = probe(batch, invocation_context())
        if _failures(response) != records or work.runs:
            raise BenchmarkInvalid(f"{variant}: in-progress probe misbehaved: {response}")
        return CallCounts(variant, Case.IN_PROGRESS, records, counter.snapshot())
    finally:
        release.set()
        for thread in threads:
            thread.join(HOLD_TIMEOUT_S)
        sqs.delete_queue(QueueUrl=queue_url)


def calls_per_record(
    rig: Rig, variant: Variant, records: int, in_progress_records: int
) -> list[CallCounts]:
    return [
        *new_and_duplicate(rig, variant, records),
        in_progress(rig, variant, in_progress_records),
    ]
