"""One Kinesis chaos run of one consumer: a stream of its own, the records put, pollers leasing
the shards, the drain, the books.

The stream side needs no deployed app: moto serves Kinesis and the DLQ (SQS), DynamoDB Local the
idempotency table, the execution log and the shard leases. Each consumer under test gets its
own stream, tables and DLQ, and the same plan, so it meets the same records and faults.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

from exactly_once import IdempotencyStore
from fault_injection import accounting, stream_accounting
from fault_injection.consumers import Library
from fault_injection.events import EVENT_DIR_ENV, read_events
from fault_injection.shard_leases import ShardLeases, create_lease_table
from fault_injection.stream_feed import Placed, create_stream, put_records
from fault_injection.stream_worker import StreamWorkerSpec, worker_main
from fault_injection.stream_workload import KinesisSettings, StreamPlan
from fault_injection.supervisor import PoolStats, WorkerPool
from fault_injection.tables import create_run_tables
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.lock_off import LOCK_OFF_ENV
from local_aws.moto_server import REGION, MotoServer, aws_env

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

SETTLE_S = 3.0
Progress = Callable[[str], None]


@dataclass(frozen=True)
class StreamConsumerKind:
    name: str
    handler: str  # "module:attribute", imported in each poller process
    title: str


STREAM_CONSUMERS: dict[str, StreamConsumerKind] = {
    kind.name: kind
    for kind in (
        StreamConsumerKind(
            "layer", "fault_injection.consumer_stream:handle_fenced", "layer, fenced effect"
        ),
        StreamConsumerKind(
            "layer-unfenced",
            "fault_injection.consumer_stream:handle_unfenced",
            "layer, plain effect",
        ),
        # A self-test of the order verdict (each batch handed over reversed), not a comparison.
        StreamConsumerKind(
            "layer-reversed",
            "fault_injection.consumer_stream:handle_reversed",
            "layer, batches reversed (self-test)",
        ),
    )
}
DEFAULT_STREAM_CONSUMERS = "layer,layer-unfenced"


def stream_consumers(names: str) -> list[StreamConsumerKind]:
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in STREAM_CONSUMERS]
    if unknown:
        raise ValueError(
            f"unknown consumer(s) {unknown} on kinesis; known: {sorted(STREAM_CONSUMERS)}"
        )
    return [STREAM_CONSUMERS[n] for n in wanted]


@dataclass
class KinesisStack:
    """moto (Kinesis, SQS) and DynamoDB Local, and the variables that point a process at them."""

    moto: MotoServer = field(default_factory=MotoServer)
    dynamodb: DynamoDBLocal = field(default_factory=DynamoDBLocal)

    @property
    def environment(self) -> dict[str, str]:
        return {**aws_env(self.moto.endpoint), "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb.endpoint}

    def client(self, service: str) -> Any:
        endpoint = self.dynamodb.endpoint if service == "dynamodb" else self.moto.endpoint
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 (moto and DynamoDB Local accept any)
        )


@contextmanager
def kinesis_stack() -> Iterator[KinesisStack]:
    stack = KinesisStack()
    stack.moto.start()
    try:
        stack.dynamodb.start()
        try:
            yield stack
        finally:
            stack.dynamodb.stop()
    finally:
        stack.moto.stop()


@dataclass
class StreamRun:
    """Everything the report shows about one consumer's run."""

    kind: StreamConsumerKind
    verdict: stream_accounting.StreamVerdict
    pool: PoolStats
    events: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    batches: Counter[str] = field(default_factory=Counter)
    drained: bool = True
    pause_s: float = 0.0
    elapsed_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.verdict.ok and self.drained


def _checkpoints(leases: ShardLeases) -> dict[str, str | None]:
    return {item["shard"]["S"]: item.get("checkpoint", {}).get("S") for item in leases.states()}


def _behind(checkpoints: dict[str, str | None], last: dict[str, int]) -> int:
    """Shards whose checkpoint has not reached their last record."""
    return sum(
        1
        for shard, number in last.items()
        if checkpoints.get(shard) is None or int(str(checkpoints[shard])) < number
    )


def wait_until_drained(
    leases: ShardLeases, last: dict[str, int], pool: WorkerPool, timeout_s: float, tick: Progress
) -> bool:
    """True once every shard's checkpoint reached its last record and no poller was frozen for
    SETTLE_S: a frozen zombie still has writes to try when it wakes."""
    deadline = time.monotonic() + timeout_s
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        pool.raise_if_broken()
        behind, frozen = _behind(_checkpoints(leases), last), pool.frozen
        tick(f"{behind} shard(s) behind, {frozen} poller(s) frozen")
        if behind == 0 and frozen == 0:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= SETTLE_S:
                return True
        else:
            quiet_since = None
        time.sleep(0.5)
    return False


def run_stream_consumer(
    stack: KinesisStack,
    kind: StreamConsumerKind,
    plan: StreamPlan,
    settings: KinesisSettings,
    workdir: Path,
    progress: Progress = lambda _: None,
) -> StreamRun:
    started = time.monotonic()
    ddb: DynamoDBClient = stack.client("dynamodb")
    sqs: SQSClient = stack.client("sqs")
    kinesis = stack.client("kinesis")
    prefix = f"kinesis-{kind.name}-{uuid.uuid4().hex[:6]}"
    idempotency, ledger = create_run_tables(ddb, Library.LAYER, prefix)
    dlq = sqs.create_queue(QueueName=f"{prefix}-dlq")["QueueUrl"]
    arn, shards = create_stream(kinesis, prefix, settings.shards)
    lease_table = f"{prefix}-leases"
    create_lease_table(ddb, lease_table, shards)
    positions = put_records(kinesis, prefix, plan.records)
    progress(f"{kind.name}: put {len(positions)} records on {len(shards)} shards")
    run_dir = workdir / prefix
    event_dir = run_dir / "events"
    event_dir.mkdir(parents=True, exist_ok=True)
    environment = {
        **stack.environment,
        "IDEMPOTENCY_TABLE": idempotency,
        "LEDGER_TABLE": ledger,
        "CONSUMER_SCOPE": "orders",
        "DEAD_LETTER_QUEUE_URL": dlq,
        "LEASE_MARGIN_MS": str(settings.lease_margin_ms),
        EVENT_DIR_ENV: str(event_dir),
        # Always set: an EONCE_LOCK_OFF=1 exported in the caller's shell must never reach a run
        # that did not ask for it.
        LOCK_OFF_ENV: "1" if settings.lock_off else "0",
    }
    rates = settings.rates
    spec = StreamWorkerSpec(
        environment=environment,
        handler=kind.handler,
        stream=prefix,
        stream_arn=arn,
        lease_table=lease_table,
        shards=len(shards),
        workers=settings.workers,
        batch_size=settings.batch_size,
        function_timeout_s=settings.function_timeout_s,
        shard_lease_s=settings.shard_lease_s,
        throttle_rate=rates.throttle,
        lost_reply_rate=rates.lost_reply,
        checkpoint_drop_rate=rates.delete_failure,
        seed=settings.seed,
        log_dir=str(run_dir),
    )
    last = _last_positions(positions)
    leases = ShardLeases(ddb, lease_table, "harness", settings.shard_lease_s)
    pause_s = settings.zombie_pause_s
    pool = WorkerPool(spec, settings.workers, pause_s, target=worker_main).start()
    try:
        drained = wait_until_drained(
            leases,
            last,
            pool,
            settings.drain_timeout_s,
            lambda state: progress(f"{kind.name}: draining, {state}"),
        )
    finally:
        pool.stop()
    verdict = stream_accounting.account(
        plan,
        positions,
        stream_accounting.read_executions(ddb, ledger),
        stream_accounting.drain_letters(sqs, dlq),
        accounting.pending(IdempotencyStore(idempotency, client=ddb)),
        _checkpoints(leases),
        pool.stats.killed_pids,
        pool.stats.paused_pids,
    )
    run = StreamRun(kind, verdict, pool.stats, drained=drained, pause_s=pause_s)
    _tally(run, event_dir)
    run.elapsed_s = time.monotonic() - started
    return run


def _last_positions(positions: list[Placed]) -> dict[str, int]:
    last: dict[str, int] = {}
    for position in positions:
        last[position.shard] = max(last.get(position.shard, 0), position.number)
    return last


def _tally(run: StreamRun, event_dir: Path) -> None:
    for event in read_events(event_dir):
        kind = str(event.get("kind"))
        if kind == "batch":
            for name in (
                "received",
                "done",
                "checkpoint_dropped",
                "checkpoint_refused",
                "takeovers",
            ):
                run.batches[name] += int(event.get(name, 0))
            run.batches["invocations"] += 1
            run.outcomes.update({str(k): int(v) for k, v in (event.get("outcomes") or {}).items()})
            continue
        run.events[kind] += 1
        if kind in ("crash", "pause"):
            run.events[f"{kind}: {event.get('point')}"] += 1
