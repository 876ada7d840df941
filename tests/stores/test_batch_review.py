"""The batched queue path (waves, gathered completions) held to what the per-record path
promised, on a real PostgreSQL server: found by a review of issue 27's batch path."""

from __future__ import annotations

from typing import Any

import pytest

from exactly_once import Outcome, begin, sqs_consumer
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock
from tests.stores.pg_support import faulty_store, insert_entry, ledger_rows, sqs_record_of

_record = sqs_record_of


def test_a_batched_record_whose_commit_failed_is_failed_not_completed_without_its_writes(
    pg_dsn: str, scope: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record's transaction (ctx.transaction) commits with its completion; when that
    commit fails, its writes are gone, so the key must not be recorded COMPLETED (a retry of
    the bare completion would record work that never happened: a lost record). As on the
    per-record path, it is failed as retryable and reported for redelivery."""
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)

    @sqs_consumer(key="id", dsn=pg_dsn, scope=scope, fingerprint=False)
    def handler(body: dict[str, Any], ctx: Any) -> str:
        insert_entry(ctx.transaction, body["id"], ctx.fence)
        return "ok"

    store, pool = faulty_store(pg_dsn, clock, {"complete": ["fail"]})
    handler.processor().store = store  # the consumer's processor, on the faulty pool
    key = f"{scope}-commit"
    record = _record({"id": key})
    response = handler({"Records": [record]}, None)
    assert pool.injected == {("complete", "fail"): 1}
    assert ledger_rows(pg_dsn, key) == []  # the business write rolled back with the commit
    assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert handler.last_results[0].outcome is Outcome.FAILED
    stored = store.get(scope, key)
    assert stored is not None
    assert stored.status is Status.FAILED  # not COMPLETED: nothing of the work committed
    again = begin(scope, key, store=store)
    assert again.acquired
    assert again.retry
