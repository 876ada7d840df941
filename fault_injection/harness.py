"""One chaos run of one consumer on a running local stack: store, workers, feed, drain, books.

Consumers run one after another on the same deployed Orders queue and DLQ, each with a fresh
store (tables, or a database on PostgreSQL) and the same plan, so they meet the same messages
and the same planned faults.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fault_injection import accounting
from fault_injection.consumers import ConsumerKind
from fault_injection.events import EVENT_DIR_ENV, read_events
from fault_injection.feeder import feed
from fault_injection.run_stores import DynamoRunStore, PostgresRunStore, RunStore
from fault_injection.settings import STEPS_LOST_REPLY_ENV, ChaosSettings, StoreKind, Workload
from fault_injection.supervisor import PoolStats, WorkerPool
from fault_injection.worker import WorkerSpec
from fault_injection.workload import Plan
from local_aws.local_stack import LocalStack
from local_aws.lock_off import LOCK_OFF_ENV
from local_aws.poller import FunctionBinding, queue_backlog

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

SETTLE_S = 3.0
Progress = Callable[[str], None]


@dataclass
class ConsumerRun:
    """Everything the report shows about one consumer's run."""

    kind: ConsumerKind
    verdict: accounting.Verdict
    pool: PoolStats
    events: Counter[str] = field(default_factory=Counter)  # injected and observed, by kind
    outcomes: Counter[str] = field(default_factory=Counter)  # the layer's per-record outcomes
    batches: Counter[str] = field(default_factory=Counter)  # received, deleted, ...
    drained: bool = True
    pause_s: float = 0.0
    elapsed_s: float = 0.0


def orders_binding(stack: LocalStack) -> FunctionBinding:
    for binding in stack.bindings():
        if binding.queue_url == stack.outputs["OrdersQueueUrl"]:
            return binding
    raise RuntimeError("the deployed stack has no Orders function bound to its queue")


def visibility_timeout_s(sqs: SQSClient, queue_url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["VisibilityTimeout"])
    return int(attributes["Attributes"]["VisibilityTimeout"])


def wait_until_quiet(
    sqs: SQSClient, queue_url: str, pool: WorkerPool, timeout_s: float, tick: Progress
) -> bool:
    """True once the queue held nothing (visible, in flight, delayed) and no worker was frozen
    for SETTLE_S: a frozen zombie still has work to finish when it wakes."""
    deadline = time.monotonic() + timeout_s
    quiet_since: float | None = None
    while time.monotonic() < deadline:
        pool.raise_if_broken()
        backlog, frozen = queue_backlog(sqs, queue_url), pool.frozen
        tick(f"{backlog} in the queue, {frozen} worker(s) frozen")
        if backlog == 0 and frozen == 0:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= SETTLE_S:
                return True
        else:
            quiet_since = None
        time.sleep(0.5)
    return False


def run_store(
    stack: LocalStack, kind: ConsumerKind, settings: ChaosSettings, prefix: str
) -> RunStore:
    """Fresh tables (DynamoDB) or a fresh database on the stack's server (PostgreSQL)."""
    if settings.store is StoreKind.POSTGRES:
        if stack.postgres is None:
            raise RuntimeError("a PostgreSQL run needs a stack started with postgres=")
        return PostgresRunStore.create(stack.postgres.server, prefix)
    return DynamoRunStore.create(stack.ddb(), kind.library, prefix)


def run_consumer(
    stack: LocalStack,
    kind: ConsumerKind,
    plan: Plan,
    settings: ChaosSettings,
    workdir: Path,
    progress: Progress = lambda _: None,
) -> ConsumerRun:
    started = time.monotonic()
    sqs = stack.sqs()
    binding = orders_binding(stack)
    prefix = f"chaos-{kind.name}-{uuid.uuid4().hex[:6]}"
    store = run_store(stack, kind, settings, prefix)
    run_dir = workdir / prefix
    event_dir = run_dir / "events"
    environment = {
        **store.environment({**stack.aws_environment, **binding.environment}),
        EVENT_DIR_ENV: str(event_dir),
    }
    # Always set: a worker inherits the caller's environment, where an exported
    # EONCE_LOCK_OFF=1 must never turn the lock off in a run that did not ask for it.
    environment[LOCK_OFF_ENV] = "1" if settings.lock_off else "0"
    if settings.workload is Workload.STEPS and settings.store is StoreKind.DYNAMODB:
        # The steps consumers lose this share of their TransactWriteItems replies.
        environment[STEPS_LOST_REPLY_ENV] = str(settings.rates.lost_reply)
    pause_s = settings.pause_s or visibility_timeout_s(sqs, binding.queue_url) + 3.0
    spec = WorkerSpec(
        binding=replace(binding, environment={}),
        environment=environment,
        handler=kind.handler,
        throttle_rate=settings.rates.throttle,
        delete_failure_rate=settings.rates.delete_failure,
        seed=settings.seed,
        log_dir=str(run_dir),
        store=settings.store,
        lost_reply_rate=settings.rates.lost_reply,
    )
    pool = WorkerPool(spec, settings.workers, pause_s).start()
    try:
        sent = feed(
            sqs,
            binding.queue_url,
            plan.messages,
            settings.backlog,
            lambda n: progress(f"{kind.name}: sent {n}/{len(plan.messages)}"),
            pool.raise_if_broken,
        )
        drained = wait_until_quiet(
            sqs,
            binding.queue_url,
            pool,
            settings.drain_timeout_s,
            lambda state: progress(f"{kind.name}: draining, {state}"),
        )
    finally:
        pool.stop()
    left = queue_backlog(sqs, binding.queue_url)
    if left:
        sqs.purge_queue(QueueUrl=binding.queue_url)  # the next consumer starts clean
    dead_letters = accounting.drain_dead_letters(sqs, stack.outputs["OrdersDeadLetterQueueUrl"])
    verdict: accounting.Verdict
    if settings.workload is Workload.STEPS:  # per (key, step): fault_injection/steps_books.py
        from fault_injection import steps_books

        verdict = steps_books.account(
            plan, sent, store, dead_letters, left, pool.stats.killed_pids, pool.stats.paused_pids
        )
    else:
        verdict = accounting.account(
            plan,
            sent,
            store.ledger(),
            dead_letters,
            store.unfinished(),
            left,
            pool.stats.killed_pids,
            pool.stats.paused_pids,
        )
    if not verdict.ok:
        _dump_problems(run_dir / "problems.json", store, plan, sent, verdict)
    run = ConsumerRun(kind, verdict, pool.stats, drained=drained, pause_s=pause_s)
    _tally(run, event_dir)
    run.elapsed_s = time.monotonic() - started
    return run


def _dump_problems(
    path: Path,
    store: RunStore,
    plan: Plan,
    sent: dict[int, str],
    verdict: accounting.Verdict,
) -> None:
    """The raw items behind each broken invariant: the tables vanish with the stack."""
    by_id = {mid: plan.messages[index] for index, mid in sent.items()}
    keys = set(verdict.doubles) | verdict.missing
    keys |= {by_id[mid].key or "" for mid in verdict.lost if mid in by_id} - {""}
    dump: dict[str, Any] = {"verdict": repr(verdict), "keys": {}}
    for key in sorted(keys):
        dump["keys"][key] = store.raw(key)
    path.write_text(json.dumps(dump, indent=1, default=str))


def _tally(run: ConsumerRun, event_dir: Path) -> None:
    for event in read_events(event_dir):
        kind = str(event.get("kind"))
        if kind == "batch":
            _add_batch(run, event)
            continue
        run.events[kind] += 1
        if kind in ("crash", "pause"):
            run.events[f"{kind}: {event.get('point')}"] += 1
        elif kind == "pg-fault":  # e.g. "pg-fault: lose commit"
            run.events[f"{kind}: {event.get('fault')} {event.get('op')}"] += 1


def _add_batch(run: ConsumerRun, event: dict[str, Any]) -> None:
    for name in ("received", "reported_failed", "deleted", "delete_dropped", "delete_failed"):
        run.batches[name] += int(event.get(name, 0))
    run.batches["takeovers"] += int(event.get("takeovers", 0))
    run.batches["invocations"] += 1
    run.outcomes.update({str(k): int(v) for k, v in (event.get("outcomes") or {}).items()})
