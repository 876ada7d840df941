"""`once` judges DynamoDB clock skew by its own lease margin (LEASE_MARGIN_MS).

The store refuses takeovers while this clock is certainly ahead of DynamoDB's by more than the
margin (clock_skew.py). The entry points' stores take their configured margin as that limit;
the store `begin` opened for itself did not (its settings carry no lease), so it judged by the
default 5 s: with LEASE_MARGIN_MS=2000, a clock 3-4 s ahead took over a lease that, by the
holder's clock, had seconds left.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from email.utils import formatdate
from typing import TYPE_CHECKING

import pytest

from exactly_once import IdempotencyStore
from exactly_once.claims import ClaimStatus
from exactly_once.once_lock import begin
from exactly_once.stores.dynamodb import clock_skew

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal


@pytest.fixture(autouse=True)
def _fresh_estimate() -> Iterator[None]:
    clock_skew.reset()
    yield
    clock_skew.reset()


def test_begin_refuses_a_takeover_when_ahead_by_more_than_its_margin(
    ddb: DynamoDBClient,
    dynamodb_local: DynamoDBLocal,
    idempotency_table: str,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    monkeypatch.setenv("IDEMPOTENCY_TABLE", idempotency_table)
    monkeypatch.setenv("LEASE_MARGIN_MS", "2000")
    # A holder whose 30 s lease ended a minute ago by this process's clock.
    holder = IdempotencyStore(idempotency_table, client=ddb, clock=lambda: time.time() - 90)
    assert holder.acquire(scope, "k", lease_ms=30_000, owner="holder").acquired
    clock_skew.reset()  # forget what that reply measured
    # DynamoDB's Date reads 4 s earlier: this clock is certainly 3 to 4 s ahead, past the 2 s
    # margin (and inside the default 5 s).
    now = time.time()
    clock_skew.observe(formatdate(now - 4, usegmt=True), now, now)
    assert 2_000 < clock_skew.ahead_ms() < 5_000

    assert begin(scope, "k").status is ClaimStatus.IN_PROGRESS
