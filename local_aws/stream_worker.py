"""Stream consumers on the local stack: one worker process per deployed stream function that
reads its Kinesis stream (or its table's stream in DynamoDB Local) with
`local_aws.stream_poller`, as Lambda's event source mapping would.

The process is the function's (its environment, its handler, the harness's `--lock-off`
switch), like the SQS poller's workers, and there is exactly one per function: a shard is read
by one poller at a time, as Lambda does with a parallelization factor of 1, so the records of a
shard reach the function in order. Each round reports what it did; a round that found no
record on any shard is `idle`, and its start time tells the supervisor that everything put
before it has been read (`StreamWorkers.idle_since`).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from local_aws.stream_bindings import DYNAMODB, StreamBinding
from local_aws.stream_failures import SqsDestination
from local_aws.stream_poller import StreamPoller
from local_aws.stream_shards import DynamoDBStreamShards, KinesisShards, ShardSource
from local_aws.workers import FunctionWorkers, Handler, StopFlag, run_worker

if TYPE_CHECKING:
    import multiprocessing as mp
    from multiprocessing.synchronize import Event as EventType

    from mypy_boto3_sqs import SQSClient

IDLE_PAUSE_S = 0.2


@dataclass
class StreamRound:
    """One round of a stream worker: every ready shard polled once."""

    function_name: str
    started_at: float  # epoch seconds
    idle: bool
    invocations: int = 0
    partial: int = 0  # answered with batchItemFailures
    errors: int = 0  # raised, or answered in a shape Lambda rejects
    given_up: int = 0  # batches sent to the on-failure queue
    outcomes: Counter[str] = field(default_factory=Counter)
    takeovers: int = 0


class _Counted:
    """The handler, with each invocation's record outcomes (`last_results`) kept."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.outcomes: Counter[str] = Counter()
        self.takeovers = 0

    def __call__(self, event: Any, context: Any) -> Any:
        try:
            return self.handler(event, context)
        finally:
            for result in getattr(self.handler, "last_results", []) or []:
                self.outcomes[str(result.outcome)] += 1
                self.takeovers += int(bool(result.takeover))


def stream_worker_main(
    binding: StreamBinding,
    aws_environment: dict[str, str],
    stop: EventType,
    reports: mp.Queue[StreamRound],
    log_path: str | None = None,
    parent: int | None = None,
) -> None:
    """A worker process whose every round polls each shard of the binding's stream once."""
    polling: list[tuple[StreamPoller, _Counted]] = []

    def poll(sqs: SQSClient, handler: Handler, region: str, stopping: StopFlag) -> None:
        if not polling:
            counted = _Counted(handler)
            source = shard_source(binding, region)
            url = binding.on_failure_queue_url
            destination = SqsDestination(sqs, url) if url else None
            settings = binding.settings(region)
            polling.append((StreamPoller(source, counted, settings, destination), counted))
        poller, counted = polling[0]
        started = time.time()
        invocations, given_up = len(poller.invocations), len(poller.given_up)
        counted.outcomes, counted.takeovers = Counter(), 0
        moved = poller.poll_once()
        done = poller.invocations[invocations:]
        reports.put(
            StreamRound(
                binding.function_name,
                started_at=started,
                idle=not moved,
                invocations=len(done),
                partial=sum(1 for i in done if i.outcome == "partial"),
                errors=sum(1 for i in done if i.outcome == "error"),
                given_up=len(poller.given_up) - given_up,
                outcomes=counted.outcomes,
                takeovers=counted.takeovers,
            )
        )
        if not moved:
            time.sleep(IDLE_PAUSE_S)

    run_worker(binding, aws_environment, stop, log_path, parent, poll)


def shard_source(binding: StreamBinding, region: str) -> ShardSource:
    """The binding's shards: its Kinesis stream on moto, or its table's stream in DynamoDB
    Local, where the table is mirrored and its items written (moto's copy of the table, whose
    stream the deployment's mapping names, stays empty)."""
    import boto3

    if binding.source == DYNAMODB:
        endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
        table = boto3.client("dynamodb").describe_table(TableName=binding.stream_name)["Table"]
        if not table.get("LatestStreamArn"):
            raise RuntimeError(f"table {binding.stream_name} has no stream in DynamoDB Local")
        streams = boto3.client("dynamodbstreams", endpoint_url=endpoint)
        return DynamoDBStreamShards(streams, table["LatestStreamArn"], region)
    kinesis = boto3.client("kinesis")
    return KinesisShards(kinesis, binding.stream_name, region, stream_arn=binding.stream_arn)


class StreamWorkers(FunctionWorkers[StreamRound, StreamBinding]):
    """One worker per stream function; counts its rounds' outcomes per consumer."""

    worker = staticmethod(stream_worker_main)

    def __init__(
        self,
        bindings: list[StreamBinding],
        aws_environment: dict[str, str],
        log_dir: Path | None = None,
    ) -> None:
        super().__init__(bindings, aws_environment, workers=1, log_dir=log_dir)
        self._labels = {b.function_name: b.label for b in bindings}
        self._idle_since: dict[str, float] = {}

    def fold(self, report: StreamRound) -> None:
        label = self._labels.get(report.function_name, report.function_name)
        total = self._totals.setdefault(label, Counter())
        total.update(report.outcomes)
        total["invocations"] += report.invocations
        total["partial_responses"] += report.partial
        total["function_errors"] += report.errors
        total["given_up_batches"] += report.given_up
        total["takeovers"] += report.takeovers
        if report.idle:
            self._idle_since[label] = max(self._idle_since.get(label, 0.0), report.started_at)
        else:
            self._idle_since.pop(label, None)

    def idle_since(self) -> dict[str, float]:
        """Per consumer, the start of its latest idle round, if its latest round was idle: a
        round that started after the last put and found nothing means all was read."""
        self.collect()
        return dict(self._idle_since)

    def wait_until_read(self, since: float, timeout_s: float) -> bool:
        """True once every consumer had an idle round that started after `since`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            idle = self.idle_since()
            if all(idle.get(b.label, 0.0) > since for b in self.bindings):
                return True
            time.sleep(0.2)
        return False
