"""Real process crashes between and inside steps, on both stores: each step's effect once.

Each crashed holder is a child process (tests/steps/crash_holder.py) that takes the key, runs
the three steps and dies with `os._exit(137)` at a planned point: between two steps, or inside
ship after its provider call and its write but before its recovery point commits (on
PostgreSQL: rows inserted in `step.transaction`, no COMMIT; on DynamoDB: the write is still in
the step's list). The next holder takes the key over once the lease has ended (its store's
clock runs ahead of the crashed one's) and runs the steps again: the books (entry_support)
count each step's committed effect. The holders are `begin`'s locks, or SQS consumers given
the same message again (the crashed invocation's, redelivered). With the fence off (a plain
function that redoes every step, holding the same lock) the same crashes leave doubles: the
verdict can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly_once import begin, sqs_consumer
from exactly_once.outcomes import Outcome
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock
from tests.consumer.conftest import lambda_context, sqs_record
from tests.steps.crash_holder import CRASHED
from tests.steps.entry_support import (
    STEPS,
    Books,
    DynamoBooks,
    PostgresBooks,
    doubles,
    once_each,
    plain_steps,
    three_steps,
)
from tests.stores.conftest import StoreFactory

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 30  # the crashed holders' lease; each next holder's clock runs past it


@pytest.fixture
def books(backend: str, request: pytest.FixtureRequest) -> Iterator[Books]:
    if backend == "postgres":
        yield PostgresBooks(request.getfixturevalue("pg_dsn")).create()
        return
    yield DynamoBooks(request.getfixturevalue("ddb"), request.getfixturevalue("ledger_table"))


@pytest.fixture
def store_spec(backend: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """How a child process opens the store the test reads (crash_holder.open_store)."""
    if backend == "postgres":
        return {"backend": "postgres", "dsn": request.getfixturevalue("pg_dsn")}
    ddb = request.getfixturevalue("ddb")
    return {
        "backend": "dynamodb",
        "endpoint": str(ddb.meta.endpoint_url),
        "table": request.getfixturevalue("idempotency_table"),
    }


class Holders:
    """The key's holders in turn: children that crash, then the test's own, which finishes.
    Holder n's store clock runs n leases (and a margin) ahead of real time."""

    def __init__(
        self, spec: dict[str, Any], books: Books, make_store: StoreFactory, via: str = "lock"
    ) -> None:
        self.spec = spec
        self.books = books
        self.make_store = make_store
        self.via = via  # "lock": `begin`'s; "sqs": an SQS consumer's handler
        self.record: dict[str, Any] | None = None  # the SQS record, delivered again each time
        self.fences: list[int] = []

    def offset(self) -> float:
        return len(self.fences) * (LEASE_S + 60.0)

    def crash(self, scope: str, key: str, at: str, *, fenced: bool) -> None:
        spec = {
            **self.spec,
            "books": self.books.describe(),
            "scope": scope,
            "key": key,
            "crash": at,
            "fenced": fenced,
            "lease_s": LEASE_S,
            "clock_offset_s": self.offset(),
            "via": self.via,
            "record": self.delivery(key),
        }
        ran = subprocess.run(
            [sys.executable, "-m", "tests.steps.crash_holder", json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
            env={**os.environ, "POWERTOOLS_METRICS_DISABLED": "true"},
        )
        assert ran.returncode == CRASHED, (ran.returncode, ran.stdout, ran.stderr[-2000:])
        self.fences.append(int(ran.stdout.split()[0]))

    def delivery(self, key: str) -> dict[str, Any]:
        """The SQS record of the order: the same message each time SQS delivers it."""
        if self.record is None:
            self.record = sqs_record({"orderId": key})
            self.record["attributes"]["ApproximateReceiveCount"] = "2"
        return self.record

    def finish(self, scope: str, key: str, *, fenced: bool) -> Store:
        """The next holder, in this process: takes the key over and runs every step."""
        clock = FakeClock(time.time() + self.offset())
        store = self.make_store(clock=clock)
        if self.via == "sqs":
            return self.consume(scope, key, store)
        claim = begin(scope, key, store=store, lease_s=LEASE_S)
        assert claim.acquired, claim.status
        assert claim.takeover
        assert claim.lock.fence > self.fences[-1]
        if fenced:
            three_steps(self.books, claim.lock, key)
        else:
            plain_steps(self.books, key)
        claim.lock.succeed("shipped")
        return store

    def consume(self, scope: str, key: str, store: Store) -> Store:
        """The redelivery of the SQS record to a consumer on `store`: it takes the key over."""
        options: dict[str, Any] = {"dsn": self.spec.get("dsn"), "table_name": None}
        if self.spec["backend"] == "dynamodb":
            options = {"table_name": self.spec["table"], "dynamodb_client": store.client}  # type: ignore[attr-defined]
        fences: list[int] = []

        def handler(body: Any, ctx: Any) -> dict[str, str]:
            fences.append(ctx.fence)
            return three_steps(self.books, ctx, body["orderId"])

        consumer = sqs_consumer(key="orderId", scope=scope, fingerprint=False, **options)(handler)
        consumer.processor().store = store
        response = consumer({"Records": [self.delivery(key)]}, lambda_context())
        assert response == {"batchItemFailures": []}
        (result,) = consumer.last_results
        assert result.outcome is Outcome.PROCESSED
        assert result.takeover
        assert fences[0] > self.fences[-1]
        return store


CRASHES = {
    # crash points of the holders before the one that finishes -> the committed effects they
    # leave, fenced and plain
    "between charge and ship": (["after_charge"], {"charge": 1}, {"charge": 1}),
    "between ship and email": (["after_ship"], {"charge": 1, "ship": 1}, {"charge": 1, "ship": 1}),
    "inside ship, before its point": (["in_ship"], {"charge": 1}, {"charge": 1, "ship": 1}),
    "twice: after charge, then inside ship": (
        ["after_charge", "in_ship"],
        {"charge": 1},
        {"charge": 2, "ship": 1},
    ),
}


@pytest.mark.parametrize("via", ["lock", "sqs"])
@pytest.mark.parametrize("crashes", list(CRASHES), ids=list(CRASHES))
def test_crashed_holders_leave_each_step_effect_exactly_once(
    crashes: str,
    via: str,
    books: Books,
    store_spec: dict[str, Any],
    make_store: StoreFactory,
    scope: str,
) -> None:
    """`via`: the holders are `begin`'s locks, or SQS consumers given one message again."""
    points, left_fenced, _ = CRASHES[crashes]
    key = f"order-{uuid.uuid4().hex[:8]}"
    holders = Holders(store_spec, books, make_store, via)
    for at in points:
        holders.crash(scope, key, at, fenced=True)
    assert books.effects(key) == Counter(left_fenced)  # a crash inside a step commits nothing

    store = holders.finish(scope, key, fenced=True)

    effects = books.effects(key)
    assert doubles(effects) == {}
    assert once_each(effects), effects
    record = store.get(scope, key)
    assert record is not None
    assert record.status is Status.COMPLETED
    assert [point.name for _, point in sorted(record.steps.items())] == list(STEPS)
    # Every step called the provider with one idempotency key, whichever holder called it,
    # so a provider that deduplicates acted once per step, even for a step run twice.
    calls = books.provider_calls(key)
    keys = {step: {k for s, k in calls if s == step} for step in STEPS}
    assert all(len(found) == 1 for found in keys.values()), calls
    assert len(calls) == len(STEPS) + points.count("in_ship")
    if via == "sqs":  # the handler's result: each step's key, read back from its point
        assert record.result == {step: found.pop() for step, found in keys.items()}
    else:
        assert record.result == "shipped"


@pytest.mark.parametrize("crashes", list(CRASHES), ids=list(CRASHES))
def test_with_the_fence_off_the_same_crashes_leave_doubles(
    crashes: str, books: Books, store_spec: dict[str, Any], make_store: StoreFactory, scope: str
) -> None:
    """The control: a plain function redoing its steps after the same crashes commits them
    twice, and the verdict the fenced run passes says so."""
    points, _, left_plain = CRASHES[crashes]
    key = f"order-{uuid.uuid4().hex[:8]}"
    holders = Holders(store_spec, books, make_store)
    for at in points:
        holders.crash(scope, key, at, fenced=False)
    assert books.effects(key) == Counter(left_plain)

    holders.finish(scope, key, fenced=False)

    effects = books.effects(key)
    expected = Counter(left_plain) + Counter(STEPS)
    assert effects == expected
    assert doubles(effects) == {name: n for name, n in expected.items() if n > 1}
    assert doubles(effects)  # at least one step's effect twice
    assert not once_each(effects)
