"""Business writes in `ctx.transaction` commit exactly with the COMPLETED record (PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import uuid
from typing import Any

import pytest

from exactly_once import (
    AcquireStatus,
    ClaimStatus,
    ConfigurationError,
    LeaseLost,
    Outcome,
    Status,
    begin,
    once,
    sqs_consumer,
)
from exactly_once.errors import CommitFailed, PermanentError
from exactly_once.ledger import record_effect
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.postgres.store import PostgresStore
from tests.conftest import FakeClock
from tests.stores.pg_support import faulty_store, insert_entry, ledger_rows, sqs_record_of


@pytest.fixture
def pg_store(pg_dsn: str, clock: FakeClock) -> PostgresStore:
    return PostgresStore(pg_dsn, clock=clock)


def test_a_zombies_business_write_rolls_back_with_its_refused_completion(
    pg_store: PostgresStore, pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    key = f"order-{uuid.uuid4().hex[:8]}"
    zombie = begin(scope, key, store=pg_store, lease_s=1)
    insert_entry(zombie.lock.transaction, key, zombie.lock.fence)
    clock.advance(2)  # its lease ends while it is frozen
    successor = begin(scope, key, store=pg_store, lease_s=30)
    assert successor.acquired
    assert successor.takeover
    insert_entry(successor.lock.transaction, key, successor.lock.fence)
    successor.lock.succeed("done")
    with pytest.raises(LeaseLost):
        zombie.lock.succeed("stale")
    assert ledger_rows(pg_dsn, key) == [(f"by-{successor.lock.fence}", successor.lock.fence)]
    assert pg_store._open == {}  # every transaction ended and its connection went back


def test_a_crash_between_the_business_write_and_completion_leaves_neither(
    pg_dsn: str, scope: str
) -> None:
    """A real process dies with its transaction open; the next holder finds nothing of it."""
    key = f"order-{uuid.uuid4().hex[:8]}"
    child = textwrap.dedent(
        f"""
        import os
        from exactly_once import begin
        from exactly_once.stores.postgres.store import PostgresStore
        claim = begin({scope!r}, {key!r}, store=PostgresStore({pg_dsn!r}), lease_s=60)
        claim.lock.transaction.execute(
            "INSERT INTO exactly_once.ledger VALUES (%s, 'crashed', %s, 'm', '{{}}', 0)",
            ({key!r}, claim.lock.fence),
        )
        print(claim.lock.fence, flush=True)
        os._exit(1)  # no commit, no rollback, no completion: the process is gone
        """  # noqa: S608 (the child's own literal SQL, with bound values)
    )
    ran = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "POWERTOOLS_METRICS_DISABLED": "true"},
    )
    assert ran.returncode == 1, ran.stderr
    assert ran.stdout.strip(), ran.stderr
    crashed_fence = int(ran.stdout.split()[0])
    assert ledger_rows(pg_dsn, key) == []
    later = PostgresStore(pg_dsn, clock=lambda: time.time() + 120)  # after the lease
    record = later.get(scope, key)
    assert record is not None
    assert record.status is Status.IN_PROGRESS
    taken = begin(scope, key, store=later)
    assert taken.acquired
    assert taken.takeover
    assert taken.lock.fence == crashed_fence + 1
    insert_entry(taken.lock.transaction, key, taken.lock.fence)
    taken.lock.succeed(None)
    assert [fence for _, fence in ledger_rows(pg_dsn, key)] == [crashed_fence + 1]


def test_a_lost_commit_reply_is_settled_as_completed(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    store, pool = faulty_store(pg_dsn, clock, {"complete": ["lose"]})  # it carries the COMMIT
    key = f"k-{uuid.uuid4().hex[:8]}"
    claim = begin(scope, key, store=store)
    insert_entry(claim.lock.transaction, key, claim.lock.fence)
    claim.lock.succeed({"ok": True})  # the commit happened; its reply did not arrive
    assert pool.injected == {("complete", "lose"): 1}
    assert len(ledger_rows(pg_dsn, key)) == 1
    dup = begin(scope, key, store=store)
    assert dup.status is ClaimStatus.COMPLETED
    assert dup.result == {"ok": True}


def test_a_completion_that_never_reaches_the_server_rolls_back_and_leaves_the_key_held(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    """Nothing committed, and the holder still holds the key: it decides. `once` (and every
    entry point) fails it as retryable, so the next delivery runs at once."""
    store, pool = faulty_store(pg_dsn, clock, {"complete": ["fail"]})
    key = f"k-{uuid.uuid4().hex[:8]}"
    claim = begin(scope, key, store=store)
    insert_entry(claim.lock.transaction, key, claim.lock.fence)
    with pytest.raises(CommitFailed):
        claim.lock.succeed(None)
    assert pool.injected == {("complete", "fail"): 1}
    assert ledger_rows(pg_dsn, key) == []
    held = store.get(scope, key)
    assert held is not None
    assert held.status is Status.IN_PROGRESS
    assert claim.lock.fail(PermanentError("the input was bad after all"))  # a replay nonce
    failed = store.get(scope, key)
    assert failed is not None
    assert failed.error is not None
    assert not failed.error.retryable


def test_once_fails_a_block_whose_commit_failed_as_retryable(
    pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    store, _ = faulty_store(pg_dsn, clock, {"complete": ["fail"]})
    key = f"k-{uuid.uuid4().hex[:8]}"

    def block() -> None:
        with once(scope, key, store=store) as claim:
            insert_entry(claim.lock.transaction, key, claim.lock.fence)

    with pytest.raises(CommitFailed):
        block()
    assert ledger_rows(pg_dsn, key) == []
    again = begin(scope, key, store=store)
    assert again.acquired
    assert again.retry


def test_once_commits_the_block_with_its_completion_and_rolls_a_raise_back(
    pg_dsn: str, scope: str
) -> None:
    with once(scope, "good", dsn=pg_dsn) as claim:
        insert_entry(claim.lock.transaction, f"{scope}-good", claim.lock.fence)

    def fails_after_the_write() -> None:
        with once(scope, "bad", dsn=pg_dsn) as claim:
            insert_entry(claim.lock.transaction, f"{scope}-bad", claim.lock.fence)
            raise RuntimeError("after the write")

    with pytest.raises(RuntimeError):
        fails_after_the_write()
    assert len(ledger_rows(pg_dsn, f"{scope}-good")) == 1
    assert ledger_rows(pg_dsn, f"{scope}-bad") == []
    assert begin(scope, "bad", dsn=pg_dsn).acquired  # FAILED and retryable


_record = sqs_record_of


def test_the_queue_consumer_commits_its_effect_with_the_record(
    pg_dsn: str, scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)
    behaviour: dict[str, str] = {}

    @sqs_consumer(key="id", dsn=pg_dsn, scope=scope, fingerprint=False)
    def handler(body: dict[str, Any], ctx: Any) -> str:
        record_effect(ctx, {"id": body["id"]})
        if behaviour.get(body["id"]) == "raise":
            raise TimeoutError("after the write")
        if behaviour.get(body["id"]) == "permanent":
            raise PermanentError("declined after the write")
        if behaviour.get(body["id"]) == "lease-lost":
            raise LeaseLost("a newer holder")
        return "ok"

    keys = [f"{scope}-{n}" for n in range(4)]
    behaviour.update({keys[1]: "raise", keys[2]: "permanent", keys[3]: "lease-lost"})
    records = [_record({"id": key}) for key in keys]
    response = handler({"Records": records}, None)
    failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
    assert failed == {r["messageId"] for r in records[1:]}  # no DLQ configured: reported failed
    assert [len(ledger_rows(pg_dsn, key)) for key in keys] == [1, 0, 0, 0]
    again = handler({"Records": [_record({"id": keys[0]})]}, None)
    assert again == {"batchItemFailures": []}
    assert handler.last_results[0].outcome is Outcome.DUPLICATE
    assert len(ledger_rows(pg_dsn, keys[0])) == 1
    store = handler.processor().store
    assert isinstance(store, PostgresStore)
    assert store._open == {}


def test_dynamodb_has_no_shared_transaction(ddb: Any, idempotency_table: str, scope: str) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb)
    claim = begin(scope, "k", store=store)
    with pytest.raises(ConfigurationError, match="PostgreSQL"):
        _ = claim.lock.transaction
    claim.lock.succeed(None)
    assert (
        store.acquire(scope, "k", lease_ms=1000, owner="o").status
        is AcquireStatus.ALREADY_COMPLETED
    )


def test_both_stores_configured_is_an_error(
    pg_dsn: str, scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_TABLE", "a-table")
    monkeypatch.setenv("IDEMPOTENCY_DSN", pg_dsn)
    with pytest.raises(ConfigurationError, match="pick one"):
        begin(scope, "k")


def test_a_batch_of_records_writing_in_ctx_transaction_commits_each_with_its_completion(
    pg_dsn: str, scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch path gathers completions: a record's transaction, opened through its
    context, must wait for its completion and commit with it, not be rolled back when the
    record's run ends (a defect seen in the benchmark: ROLLBACK 10, ledger 0)."""
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)

    @sqs_consumer(key="id", dsn=pg_dsn, scope=scope, fingerprint=False)
    def handler(body: dict[str, Any], ctx: Any) -> str:
        insert_entry(ctx.transaction, body["id"], ctx.fence)
        return "ok"

    keys = [f"{scope}-batch-{n}" for n in range(5)]
    assert handler({"Records": [_record({"id": key}) for key in keys]}, None) == {
        "batchItemFailures": []
    }
    assert {r.outcome for r in handler.last_results} == {Outcome.PROCESSED}
    assert [len(ledger_rows(pg_dsn, key)) for key in keys] == [1] * 5
