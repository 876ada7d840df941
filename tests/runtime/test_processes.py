"""Lambda Managed Instances: several processes on one instance, each serving requests at once.

The processes are forked from a parent that already served a batch, so each child inherits the
parent's clients, its store object, its batch threads (which did not survive the fork) and its
instance id, as a process-per-request runtime forked after init would. Every child serves
overlapping batches from two threads at once, against DynamoDB Local, with a plain side effect
(a file per execution in a shared scratch directory, as /tmp is shared there). Records another
holder has in flight are redelivered, as SQS would, until every one succeeds.

Without the fork handling the children hang on the dead thread pool or share the parent's
sockets; without per-process identities their owners would be the parent's.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from exactly_once import RecordContext, lifecycle, sqs_consumer
from exactly_once.sqs import batch
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.schema import Status
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.consumer.conftest import event, sqs_record

PROCESSES = 3
THREADS = 2  # concurrent requests in each process
KEYS = [f"order-{i}" for i in range(24)]
CONCURRENCY = 5  # record threads per batch
# How long a child keeps redelivering before it gives up: a bound on a wait, not a timing
# assertion. A record another holder has in flight fails until that holder's whole wave has
# written its completions (they are gathered), which on a loaded machine can take seconds, so
# the bound is time, not a count of rounds that a fast redelivery loop would use up at once.
GIVE_UP_S = 90.0
PAUSE_S = 0.05  # between rounds, as SQS hides a failed message for a while before redelivery


def make_handler(table: str, scope: str, effects: Path) -> Any:
    @sqs_consumer(table_name=table, scope=scope, key="orderId", concurrency=CONCURRENCY)
    def handle(body: dict[str, Any], ctx: RecordContext) -> str:
        # A plain effect, not idempotent by itself: one file per execution.
        (effects / f"{body['orderId']}.{uuid.uuid4().hex}").write_text(str(os.getpid()))
        return str(body["orderId"])

    return handle


def serve(handler: Any, keys: list[str], seed: int) -> int:
    """Deliver `keys` (in this thread's order) until every record succeeded; rounds used."""
    import random

    pending = list(keys)
    random.Random(seed).shuffle(pending)
    deadline = time.monotonic() + GIVE_UP_S
    round_ = 0
    while time.monotonic() < deadline:
        if not pending:
            return round_
        round_ += 1
        batch = pending[:10]
        records = {str(uuid.uuid4()): key for key in batch}
        answer = handler(
            event(*(sqs_record({"orderId": k}, message_id=m) for m, k in records.items())),
            LocalLambdaContext("orders", timeout_s=30),
        )
        failed = {item["itemIdentifier"] for item in answer["batchItemFailures"]}
        pending = pending[10:] + [records[m] for m in failed]
        if failed:
            time.sleep(PAUSE_S)
    raise AssertionError(f"records still failing after {GIVE_UP_S:g} s: {pending}")


def child(handler: Any, keys: list[str], seed: int, report: Connection, go: Any) -> None:
    try:
        errors: list[str] = []
        go.wait(60)  # every child starts at once: a loaded machine must not let one run alone

        def request(n: int) -> None:
            try:
                serve(handler, keys, seed * 10 + n)
            except BaseException as error:  # reported to the parent, which fails the test
                errors.append(repr(error))

        threads = [threading.Thread(target=request, args=(n,)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        hung = [t.name for t in threads if t.is_alive()]
        report.send({"instance": lifecycle.instance_id(), "errors": errors, "hung": hung})
    finally:
        report.close()


@pytest.fixture
def local_env(monkeypatch: pytest.MonkeyPatch, dynamodb_local: Any) -> None:
    """The layer's own clients (no injected one) reach DynamoDB Local."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")


@pytest.mark.usefixtures("local_env")
def test_forked_processes_with_concurrent_requests_run_each_key_once(
    idempotency_table: str, scope: str, tmp_path: Path
) -> None:
    handler = make_handler(idempotency_table, scope, tmp_path)
    # The parent serves a batch first: its clients, store and batch threads now exist.
    # As many keys as the pool has threads: a child that reused the pool would find it full
    # of threads that did not survive the fork, start none, and wait forever.
    warm_up = [f"warm-up-{i}" for i in range(CONCURRENCY)]
    assert serve(handler, warm_up, seed=0) == 1
    assert batch._pools  # the record threads the children inherit (and must not use)
    parent = lifecycle.instance_id()

    fork = multiprocessing.get_context("fork")
    children = []
    go = fork.Event()
    for n in range(PROCESSES):
        receive, send = fork.Pipe(duplex=False)
        process = fork.Process(target=child, args=(handler, KEYS, n + 1, send, go), daemon=True)
        process.start()
        send.close()
        children.append((process, receive))
    go.set()
    reports = []
    for process, receive in children:
        assert receive.poll(180), "a child sent no report (hung on an inherited thread pool?)"
        reports.append(receive.recv())
        process.join(timeout=30)
        assert process.exitcode == 0
    assert [(r["errors"], r["hung"]) for r in reports] == [([], [])] * PROCESSES

    instances = {r["instance"] for r in reports}
    assert len(instances) == PROCESSES
    assert parent not in instances

    executions: dict[str, int] = {}
    for effect in tmp_path.iterdir():
        key = effect.name.rsplit(".", 1)[0]
        executions[key] = executions.get(key, 0) + 1
    assert executions == {key: 1 for key in [*KEYS, *warm_up]}

    store = IdempotencyStore(idempotency_table)
    owners = set()
    for key in KEYS:
        record = store.get(scope, key)
        assert record is not None
        assert record.status is Status.COMPLETED
        assert record.result == key
        owners.add((record.owner or "").rsplit(":", 1)[-1])
    assert owners <= instances  # every key was run by a child, named as that child
    assert len(owners) > 1
