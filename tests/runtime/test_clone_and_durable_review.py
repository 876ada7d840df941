"""Review of the clone and durable rules (issue 24, items 1-2): what the first tests left out.

- A forked child may still take keys of its own (it is refused only its parent's), with its own
  transaction and heartbeat, while its parent's lock and heartbeat stay the parent's.
- A `with once(...)` block that a child leaves (its parent's lock) writes nothing.
- The pattern docs/once.md gives for a durable step's writes, as written there (and the page
  still shows it): the step's writes commit
  with the inner key, a step retried after they committed finds them and answers the same, and
  the outer durable key completes once.
- A durable lock's transaction is refused through the ledger too (it reads `ctx.transaction`).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aws_durable_execution_sdk_python import (
    DurableContext,
    StepContext,
    durable_execution,
    durable_step,
)
from aws_durable_execution_sdk_python.config import Duration, StepConfig
from aws_durable_execution_sdk_python.retries import RetryDecision
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

from exactly_once import ClaimStatus, ConfigurationError, begin, heartbeat, ledger, once
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock
from tests.runtime.test_fork_locks import in_a_forked_child
from tests.stores.pg_support import business_table as payments_table
from tests.stores.pg_support import table_rows as rows

LONG_S = 600.0  # longer than the default heartbeat lease: held by renewals


def test_a_forked_child_takes_and_completes_a_key_of_its_own(
    backend: str, store: Store, scope: str, request: pytest.FixtureRequest
) -> None:
    """Refusing the parent's lock must not refuse the child its own: a new key, its
    transaction (PostgreSQL) and its heartbeat work in the child, and the heartbeat it starts
    serves only the child's lock."""
    parents = begin(scope, "parent", lease_s=LONG_S, store=store)
    assert parents.acquired
    table = payments_table(request.getfixturevalue("pg_dsn")) if backend == "postgres" else ""
    if table:
        parents.lock.transaction.execute(f"INSERT INTO {table} VALUES ('parent', 'the parent')")  # noqa: S608

    def childs_own_key() -> None:
        claim = begin(scope, "child", lease_s=LONG_S, store=store)
        assert claim.acquired, claim.status
        assert heartbeat.held() == 1, "the child's heartbeat serves its parent's lock too"
        if table:
            claim.lock.transaction.execute(f"INSERT INTO {table} VALUES ('child', 'the child')")  # noqa: S608
        claim.lock.extend(LONG_S)
        claim.lock.succeed("the child's")
        assert heartbeat.held() == 0

    seen = in_a_forked_child({"own key": childs_own_key})

    assert seen == {"own key": "ok"}
    child = store.get(scope, "child")
    assert child is not None
    assert (child.status, child.result) == (Status.COMPLETED, "the child's")
    parent = store.get(scope, "parent")
    assert parent is not None
    assert (parent.status, parent.lock_token) == (Status.IN_PROGRESS, parents.lock.store_lock.token)
    parents.lock.succeed("the parent's")
    if table:
        assert sorted(rows(request.getfixturevalue("pg_dsn"), table)) == [
            ("child", "the child"),
            ("parent", "the parent"),
        ]


def test_a_once_block_left_in_a_forked_child_writes_nothing(
    backend: str, store: Store, scope: str, request: pytest.FixtureRequest
) -> None:
    """A fork inside `with once(...)`: the child leaves the block too. Its error is not
    recorded as the key's failure, a clean exit cannot complete the parent's key (it says
    LockInherited), and the parent's open transaction is not rolled back by the child's
    `abandon`."""
    block = once(scope, "order-1", lease_s=LONG_S, store=store)
    claim = block.__enter__()
    assert claim.acquired
    table = payments_table(request.getfixturevalue("pg_dsn")) if backend == "postgres" else ""
    if table:
        claim.lock.transaction.execute(f"INSERT INTO {table} VALUES ('order-1', 'the parent')")  # noqa: S608
    before = store.get(scope, "order-1")

    def leave_with(error: BaseException | None) -> None:
        if error is None:
            block.__exit__(None, None, None)
        else:
            assert block.__exit__(type(error), error, None) is False

    seen = in_a_forked_child(
        {
            "error": lambda: leave_with(ValueError("the child's")),
            "clean": lambda: leave_with(None),
        }
    )

    assert seen == {"error": "ok", "clean": "LockInherited"}
    assert store.get(scope, "order-1") == before
    block.__exit__(None, None, None)  # the parent's own clean exit completes the key
    done = store.get(scope, "order-1")
    assert done is not None
    assert done.status is Status.COMPLETED
    if table:
        assert rows(request.getfixturevalue("pg_dsn"), table) == [("order-1", "the parent")]


@pytest.fixture
def pg_store(pg_dsn: str, clock: FakeClock) -> PostgresStore:
    return PostgresStore(pg_dsn, clock=clock)


def retry_once_soon(error: Exception, attempt: int) -> RetryDecision:
    return (
        RetryDecision.retry(Duration.from_seconds(1)) if attempt < 2 else RetryDecision.no_retry()
    )


def test_docs_once_md_still_shows_the_durable_step_pattern_this_file_runs() -> None:
    """The test below runs the page's pattern line for line (with a store and a test table):
    if the page's pattern changes, this fails, so the two cannot drift apart."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "once.md").read_text(encoding="utf-8")
    for line in (
        'with once("orders", f"{order_id}#charge", lease_s=60) as inner:  # no DurableContext',
        "if inner.status is ClaimStatus.COMPLETED:",
        "return inner.result  # committed by an earlier attempt of the step",
        "if not inner.acquired:",
        'raise RuntimeError(f"{order_id}#charge is {inner.status}")  # the step retries',
        'inner.lock.succeed(f"charged {order_id}")',
        "context.wait(Duration.from_hours(1))  # suspends inside the block: the lock stays",
    ):
        assert line in page, line


def test_the_documented_durable_step_pattern_keeps_a_write_across_a_lost_checkpoint(
    pg_store: PostgresStore, pg_dsn: str, scope: str
) -> None:
    """docs/once.md, "Business writes in a durable execution go in a `once` of their own": the
    step's inner once commits its write; the step's first attempt then dies before its result
    is checkpointed, the retried step finds the inner key COMPLETED and returns its result
    without writing again, and the outer key completes with it."""
    table = payments_table(pg_dsn)
    attempts: list[str] = []

    @durable_step
    def charge(step: StepContext, order_id: str) -> str:
        attempts.append(order_id)
        # As in docs/once.md (the store given, since this test has no IDEMPOTENCY_DSN):
        with once(scope, f"{order_id}#charge", lease_s=60, store=pg_store) as inner:
            if inner.status is ClaimStatus.COMPLETED:
                return str(inner.result)  # committed by an earlier attempt of the step
            if not inner.acquired:
                raise RuntimeError(f"{order_id}#charge is {inner.status}")  # the step retries
            inner.lock.transaction.execute(
                f"INSERT INTO {table} VALUES (%s, 'charged')",  # noqa: S608
                (order_id,),
            )
            inner.lock.succeed(f"charged {order_id}")
        if len(attempts) == 1:  # committed, then lost before the SDK checkpoints the step
            raise ConnectionError("the invocation died before the checkpoint")
        return f"charged {order_id}"

    @durable_execution
    def handler(event: dict[str, Any], context: DurableContext) -> Any:
        with once(
            scope, event["key"], lambda_context=context, lease_s=3600, store=pg_store
        ) as claim:
            if not claim.acquired:
                return {"status": str(claim.status)}
            receipt = context.step(
                charge(event["key"]), config=StepConfig(retry_strategy=retry_once_soon)
            )
            context.wait(Duration.from_seconds(1))
            claim.lock.succeed({"receipt": receipt})
        return {"receipt": receipt}

    runner = DurableFunctionTestRunner(handler=handler)
    result = runner.run(input=json.dumps({"key": "order-1"}), execution_timeout=60)

    assert result.result is not None
    assert json.loads(result.result) == {"receipt": "charged order-1"}
    assert attempts == ["order-1", "order-1"]  # the step ran again after the lost checkpoint
    assert rows(pg_dsn, table) == [("order-1", "charged")]  # and wrote once
    outer = pg_store.get(scope, "order-1")
    assert outer is not None
    assert (outer.status, outer.result) == (Status.COMPLETED, {"receipt": "charged order-1"})


def test_a_durable_locks_ledger_entry_is_refused_too(pg_store: PostgresStore, scope: str) -> None:
    """The PostgreSQL ledger writes in `ctx.transaction`: a durable lock's must be refused
    there as well, or the entry would roll back at the next suspension."""
    durable = SimpleNamespace(
        execution_context=SimpleNamespace(durable_execution_arn=f"arn:durable/{uuid.uuid4()}"),
        lambda_context=None,
    )
    claim = begin(scope, "order-1", lambda_context=durable, lease_s=3600, store=pg_store)
    assert claim.acquired
    with pytest.raises(ConfigurationError, match=r"lock\.step\("):
        ledger.record_effect(claim.lock, {"paid": 1})
    claim.lock.succeed("done")
