"""The examples' effect as an append-only execution log (`exactly_once.ledger.append_effect`).

Every execution writes an entry of its own, so the entries per key count executions: the
verdicts of `make run` and `make chaos` can see a key executed twice. The fence alone keeps it
at one (the record's mark is per key, not per entry): a retry after the effect and a takeover
after a crash skip it, a zombie is refused (tests/chaos/test_effects.py). `record_effect`, keyed
by the business key, hides a second execution by construction: the contrast is shown here.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import IdempotencyStore, RecordContext
from exactly_once.ledger import append_effect, record_effect
from exactly_once.stores.postgres.store import PostgresStore
from local_aws import lock_off
from tests.consumer.conftest import (
    MakeConsumer,
    event,
    lambda_context,
    ledger_entries,
    sqs_record,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@pytest.fixture
def lock_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness's self-test switch, undone after the test."""
    for store in (IdempotencyStore, PostgresStore):
        monkeypatch.setattr(store, "acquire", store.acquire)  # restored at teardown
        monkeypatch.setattr(store, "acquire_many", store.acquire_many)
    lock_off.install()


def test_each_execution_is_logged_with_an_id_and_who_ran_it(
    ledger_consumer: MakeConsumer, ddb: DynamoDBClient, ledger_table: str, scope: str
) -> None:
    handler = ledger_consumer(lambda body, ctx: append_effect(ctx, {"n": 1}, table=ledger_table))
    record = sqs_record({"id": "x-1"})
    handler(event(record), lambda_context())
    handler(event(record), lambda_context())  # a duplicate: not executed, not logged
    [entry] = ledger_entries(ddb, ledger_table, "x-1")
    prefix, execution_id = entry["sk"]["S"].rsplit("#", 1)
    assert prefix == f"{scope}#effect"
    detail = json.loads(entry["detail"]["S"])
    assert detail["n"] == 1
    assert detail["execution"]["id"] == execution_id
    assert detail["execution"]["attempt"] == 1
    assert detail["execution"]["pid"] == os.getpid()
    assert entry["message_id"]["S"] == record["messageId"]


def test_a_retry_after_the_effect_does_not_log_it_again(
    ledger_consumer: MakeConsumer, ddb: DynamoDBClient, ledger_table: str
) -> None:
    written: list[str | None] = []

    def effect_then_fail(body: Any, ctx: RecordContext) -> None:
        written.append(append_effect(ctx, {"attempt": ctx.attempt}, table=ledger_table))
        if ctx.attempt == 1:
            raise TimeoutError("the reply was lost after the write")

    handler = ledger_consumer(effect_then_fail)
    record = sqs_record({"id": "x-2"})
    handler(event(record), lambda_context())
    assert handler(event(record), lambda_context()) == {"batchItemFailures": []}
    assert written[1] is None  # the mark of attempt 1 is on the record: already applied
    assert len(ledger_entries(ddb, ledger_table, "x-2")) == 1


def test_a_new_generation_of_the_record_is_a_second_execution_and_the_log_shows_it(
    ddb: DynamoDBClient, idempotency_table: str, ledger_table: str, scope: str
) -> None:
    """After the record expired, the key runs again. The log says so; `record_effect`'s item,
    keyed by the business key, refuses the second write, which is its promise (once ever)
    and also why counting its items can never show a double."""
    now = [time.time()]
    store = IdempotencyStore(idempotency_table, client=ddb, clock=lambda: now[0])
    logged, recorded = [], []
    for generation in (1, 2):
        claim = store.acquire(scope, "x-3", lease_ms=60_000, owner=f"g{generation}")
        assert claim.lock is not None
        ctx = RecordContext(
            f"m{generation}", "x-3", claim.lock.fence, 1, {}, None, store, claim.lock
        )
        logged.append(append_effect(ctx, {"g": generation}, table=ledger_table))
        recorded.append(record_effect(ctx, {"g": generation}, table=ledger_table, name="once"))
        store.complete(claim.lock, "done")
        now[0] += store.record_ttl_s + 1
    assert None not in logged
    assert recorded[0] is not None
    assert recorded[1] is None
    kinds = Counter(e["sk"]["S"].split("#")[1] for e in ledger_entries(ddb, ledger_table, "x-3"))
    assert kinds == {"effect": 2, "once": 1}


def test_with_the_lock_off_every_delivery_executes_and_the_log_counts_each(
    lock_is_off: None, ledger_consumer: MakeConsumer, ddb: DynamoDBClient, ledger_table: str
) -> None:
    """The self-test's premise, in one process: with the harness's lock-off switch the same
    message runs three times; the execution log has three entries for its key, where the
    business-keyed `record_effect` still shows one (the old verdicts could not fail)."""

    def both(body: Any, ctx: RecordContext) -> None:
        append_effect(ctx, {}, table=ledger_table)
        record_effect(ctx, {}, table=ledger_table, name="keyed")

    handler = ledger_consumer(both)
    record = sqs_record({"id": "x-4"})
    for _ in range(3):
        assert handler(event(record), lambda_context()) == {"batchItemFailures": []}
    kinds = Counter(e["sk"]["S"].split("#")[1] for e in ledger_entries(ddb, ledger_table, "x-4"))
    assert kinds == {"effect": 3, "keyed": 1}


def test_the_lock_off_switch_is_off_unless_asked() -> None:
    assert lock_off.enabled({}) is False
    assert lock_off.enabled({lock_off.LOCK_OFF_ENV: "0"}) is False
    assert lock_off.enabled({lock_off.LOCK_OFF_ENV: "1"}) is True
    assert not getattr(IdempotencyStore.acquire, "lock_off", False)


def test_the_same_holder_logging_twice_names_one_entry_that_exists(
    ledger_consumer: MakeConsumer, ddb: DynamoDBClient, ledger_table: str
) -> None:
    """One holder is one execution: a second call returns the entry the first one wrote, never
    the sort key of an entry that was not written."""
    returned: list[str | None] = []

    def twice(body: Any, ctx: RecordContext) -> None:
        returned.append(append_effect(ctx, {"call": 1}, table=ledger_table))
        returned.append(append_effect(ctx, {"call": 2}, table=ledger_table))

    ledger_consumer(twice)(event(sqs_record({"id": "x-9"})), lambda_context())
    [entry] = ledger_entries(ddb, ledger_table, "x-9")
    assert returned == [entry["sk"]["S"], entry["sk"]["S"]]
