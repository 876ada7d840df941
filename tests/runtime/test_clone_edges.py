"""The runtime models at their edges: state cached outside `clients` and `connections` in a clone.

`lifecycle.cloned()` is what a forked child and a SnapStart restore both run; these tests call
it (or the stand-in hooks of test_snapstart) and then use objects made before it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from exactly_once import clients, lifecycle
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.processor import RecordProcessor
from exactly_once.stores.protocol import Store
from tests.conftest import FakeClock
from tests.runtime.test_snapstart import Hooks
from tests.waiting import wait_until


def _handler(body: Any, ctx: Any) -> None:
    return None


_NO_STORE: Any = object()  # these processors never reach their store


def test_a_processor_made_before_a_fork_does_not_keep_the_parents_sqs_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The entry points cache their RecordProcessor across invocations, and it caches
    `clients.sqs()` in `_sqs` for good: `clients._forget` drops the registry's reference, but
    the child's processor keeps sending on the parent's connection pool (shared sockets)."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    config = ConsumerConfig(table_name="t", scope="s")
    processor = RecordProcessor(_handler, "id", config, _NO_STORE)
    parents = processor.sqs
    assert parents is clients.sqs()
    lifecycle.cloned()
    assert processor.sqs is not parents
    assert processor.sqs is clients.sqs()


def test_a_sqs_client_given_to_a_processor_is_kept_in_a_clone() -> None:
    """The counterpart (passes): a client the caller gave is the caller's to manage."""
    given: Any = object()
    processor = RecordProcessor(
        _handler, "id", ConsumerConfig(table_name="t", scope="s"), _NO_STORE, given
    )
    lifecycle.cloned()
    assert processor.sqs is given


def test_a_postgres_store_given_the_process_pool_works_after_a_restore(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """`PostgresStore(dsn, pool=connections.pool(dsn))` (the process's own pool, handed over):
    before the snapshot `connections._close` closes it, and after the restore the store keeps
    the given, now closed pool ("the pool is closed")."""
    from exactly_once.stores.postgres import connections
    from exactly_once.stores.postgres.store import PostgresStore

    hooks = Hooks()
    lifecycle.install(hooks)
    store = PostgresStore(
        pg_dsn,
        clock=clock,
        pool=connections.pool(pg_dsn),
        transaction_pool=connections.pool(pg_dsn, connections.TRANSACTIONS),
    )
    assert store.acquire(scope, "before", lease_ms=60_000, owner="init").acquired
    hooks.restore(hooks.snapshot())
    after = store.acquire(scope, "after", lease_ms=60_000, owner="restored")
    assert after.acquired


def test_a_durable_context_without_a_lambda_context_still_resumes(store: Store, scope: str) -> None:
    """Passes: the local runner's DurableContext may carry no Lambda context; the holder is
    then named by host, pid and instance id, and the replay still resumes by the ARN."""
    from types import SimpleNamespace

    from aws_durable_execution_sdk_python.exceptions import SuspendExecution

    from exactly_once import once
    from exactly_once.stores.schema import Status

    class Parked(SuspendExecution):  # a subclass outside the SDK's module
        pass

    arn = "arn:aws:lambda:eu-west-1:1:function:f/durable-execution/e9/x"
    context = SimpleNamespace(
        execution_context=SimpleNamespace(durable_execution_arn=arn), lambda_context=None
    )
    with pytest.raises(Parked), once(scope, "k", store=store, lambda_context=context, lease_s=600):
        raise Parked("waiting")
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.resume_id) == (Status.IN_PROGRESS, arn)
    assert record.owner is not None
    assert record.owner.endswith(lifecycle.instance_id())
    with once(scope, "k", store=store, lambda_context=context, lease_s=600) as claim:
        assert claim.acquired
        assert claim.resumed


def test_a_metric_write_in_flight_at_a_fork_does_not_deadlock_the_child() -> None:
    """`observability._write_lock` is held by a batch thread while it writes a metric line; a
    fork then (the calling thread is the only one copied) leaves it held forever in the child,
    whose first metric write hangs. `clients._lock` is replaced by its on_clone; this one is
    not (the logging module reinitialises its own locks at fork for the same reason)."""
    from exactly_once import observability

    held = observability._write_lock
    held.acquire()  # as the batch thread that was writing when the parent forked
    try:
        lifecycle.cloned()
        free = observability._write_lock.acquire(blocking=False)
        if free:
            observability._write_lock.release()
        assert free
    finally:
        held.release()


def test_an_entry_points_lock_held_at_a_fork_does_not_deadlock_the_child() -> None:
    """The SQS/SNS entry points (sqs/record_entry) and the HTTP API (http/api) guard their cached
    processor or store with an instance lock, held while another thread opens the store; a
    fork then leaves it held forever in the child."""
    from exactly_once import sqs_consumer

    entry: Any = sqs_consumer(table_name="t", scope="s")(_handler)
    made: list[Any] = []
    held = entry._lock
    held.acquire()  # another request's thread was opening the store at the fork
    try:
        lifecycle.cloned()
        threading.Thread(target=lambda: made.append(entry.processor()), daemon=True).start()
        # The bound only turns a hang into a failure: opening the store (clients, config) may
        # take seconds on a loaded machine, so the suite's generous default, not 10 s.
        wait_until(lambda: made, lambda: "the child's first request still waits")
    finally:
        held.release()
