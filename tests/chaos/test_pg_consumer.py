"""The PostgreSQL chaos consumer: its faults come from the run's rates, they reach the store's
statements, and whatever they hit, the effect row commits with the completion or not at all."""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from exactly_once import Status
from exactly_once.stores.postgres import connections
from exactly_once.stores.postgres.store import PostgresStore
from fault_injection.consumer_postgres import FaultyPostgresConsumer, _handle
from fault_injection.pg_faults import Decide
from fault_injection.pg_policy import (
    EACH_PROCESS,
    FAIL_KINDS,
    LOSE_KINDS,
    no_faults,
    random_faults,
)
from fault_injection.run_stores import PostgresRunStore
from local_aws.postgres_server import PostgresServer

STATEMENTS = ("acquire", "write", "read", "complete", "commit", "business")


def draws(decide: Decide, kind: str, n: int = 400) -> Counter[str | None]:
    return Counter(decide(kind) for _ in range(n))


def test_no_rates_no_faults() -> None:
    decide = random_faults(0.0, 0.0, random.Random(1))
    assert all(draws(decide, kind) == {None: 400} for kind in STATEMENTS)
    assert no_faults("commit") is None


def test_drops_hit_the_statements_the_store_recovers_and_nothing_else() -> None:
    decide = random_faults(1.0, 0.0, random.Random(1))
    for kind in STATEMENTS:
        assert draws(decide, kind) == ({"fail": 400} if kind in FAIL_KINDS else {None: 400})


def test_lost_replies_hit_the_store_statements_and_the_completion() -> None:
    decide = random_faults(0.0, 1.0, random.Random(1))
    for kind in STATEMENTS:
        assert draws(decide, kind) == ({"lose": 400} if kind in LOSE_KINDS else {None: 400})


def test_both_rates_share_one_draw() -> None:
    """A seeded mix: each statement meets at most one fault, of a kind it is eligible for."""
    decide = random_faults(0.5, 0.5, random.Random(3))
    assert set(draws(decide, "acquire")) == {"fail", "lose"}
    assert set(draws(decide, "complete")) == {"fail", "lose"}
    assert set(draws(decide, "read")) == {None}
    with pytest.raises(ValueError, match="cannot exceed 1"):
        random_faults(0.7, 0.5, random.Random(1))


def test_planned_faults_come_at_their_statement_whatever_the_draw() -> None:
    """EACH_PROCESS: the n-th acquire and completion meet their fault even at a rate too small
    to draw one, so a chaos run's verdict that each fault happened holds by plan."""
    decide = random_faults(1e-9, 1e-9, random.Random(1), planned=EACH_PROCESS)
    for kind, planned in EACH_PROCESS.items():
        met = [decide(kind) for _ in range(10)]
        assert {n: fault for n, fault in enumerate(met, start=1) if fault} == planned
    assert [decide("write") for _ in range(10)] == [None] * 10  # nothing planned for writes


def test_planned_faults_need_their_rate() -> None:
    """No rates, no faults: the plan does not force a fault the run turned off."""
    decide = random_faults(0.0, 1e-9, random.Random(1), planned=EACH_PROCESS)
    met = [decide("acquire") for _ in range(10)]
    assert [n for n, fault in enumerate(met, start=1) if fault] == [5]
    assert draws(random_faults(0.0, 0.0, random.Random(1), EACH_PROCESS), "acquire") == {None: 400}


@pytest.fixture
def dsn(postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    run = PostgresRunStore.create(postgres_server, f"chaos-consumer-{uuid.uuid4().hex[:6]}")
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)
    monkeypatch.setenv("IDEMPOTENCY_DSN", run.dsn)
    monkeypatch.setenv("CONSUMER_SCOPE", "orders")
    yield run.dsn
    connections.pool(run.dsn).close()  # the process's pool for this database, used by no one else


def record(key: str) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": "rh",
        "body": json.dumps({"orderId": key, "amount": 3}),
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:orders",
    }


def ledger_rows(dsn: str, key: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM exactly_once.ledger WHERE pk = %s", (key,))
        found = row.fetchone()
    return int(found[0]) if found else 0


def once(kind: str, fault: str) -> tuple[Decide, list[tuple[str, str]]]:
    """Fault the first statement of `kind`; the list records what was decided."""
    seen: list[tuple[str, str]] = []

    def decide(asked: str) -> str | None:
        if asked == kind and not seen:
            seen.append((asked, fault))
            return fault
        return None

    return decide, seen


def consume(dsn: str, decide: Callable[[str], str | None], key: str) -> dict[str, Any]:
    consumer = FaultyPostgresConsumer(_handle, decide)
    return consumer({"Records": [record(key)]}, None)


@pytest.mark.parametrize(
    ("kind", "fault"),
    [("acquire", "lose"), ("acquire", "fail"), ("write", "lose"), ("complete", "lose")],
)
def test_a_fault_the_store_recovers_from_still_commits_one_effect(
    dsn: str, kind: str, fault: str
) -> None:
    key = f"k-{uuid.uuid4().hex[:8]}"
    decide, seen = once(kind, fault)
    if kind == "write":  # a completion outside a transaction: no effect, so no transaction
        response = FaultyPostgresConsumer(lambda body, ctx: {"ok": True}, decide)(
            {"Records": [record(key)]}, None
        )
    else:
        response = consume(dsn, decide, key)

    assert seen == [(kind, fault)]
    assert response == {"batchItemFailures": []}
    assert ledger_rows(dsn, key) == (0 if kind == "write" else 1)
    got = PostgresStore(dsn).get("orders", key)
    assert got is not None
    assert got.status is Status.COMPLETED


@pytest.mark.parametrize(("kind", "fault"), [("complete", "fail")])
def test_a_completion_that_did_not_commit_leaves_no_effect_and_a_retryable_record(
    dsn: str, kind: str, fault: str
) -> None:
    key = f"k-{uuid.uuid4().hex[:8]}"
    decide, seen = once(kind, fault)

    response = consume(dsn, decide, key)

    assert seen == [(kind, fault)]
    assert len(response["batchItemFailures"]) == 1  # SQS delivers it again
    assert ledger_rows(dsn, key) == 0
    got = PostgresStore(dsn).get("orders", key)
    assert got is not None
    assert got.status is Status.FAILED
    assert got.error is not None
    assert got.error.retryable

    assert consume(dsn, no_faults, key) == {"batchItemFailures": []}  # the redelivery
    assert ledger_rows(dsn, key) == 1
