"""Clock skew on DynamoDB: measured from the responses' Date header, and a clock too far ahead
never takes a lease over.

The skew is injected through botocore's `before-parse` hook on a client of the test's own: it
rewrites the Date of DynamoDB Local's replies, as a server whose clock differs would send it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from email.utils import formatdate
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import AcquireStatus, IdempotencyStore
from exactly_once.stores.dynamodb import clock_skew
from exactly_once.stores.records import Acquisition
from tests.conftest import FakeClock, make_ddb_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

MARGIN_MS = 5_000


@pytest.fixture(autouse=True)
def _fresh_estimate() -> Iterator[None]:
    clock_skew.reset()
    yield
    clock_skew.reset()


class SkewedDate:
    """Rewrites each reply's Date to the real time plus `offset_s` (None: leave it)."""

    def __init__(self, client: DynamoDBClient) -> None:
        self.offset_s: float | None = None
        self.requests = 0
        client.meta.events.register("before-parse.dynamodb", self._rewrite)
        client.meta.events.register("before-send.dynamodb", self._count)

    def _rewrite(self, response_dict: dict[str, Any], **_: Any) -> None:
        if self.offset_s is not None:
            import time

            response_dict["headers"]["Date"] = formatdate(time.time() + self.offset_s, usegmt=True)

    def _count(self, **_: Any) -> None:
        self.requests += 1


@pytest.fixture
def skewed_client(dynamodb_local: DynamoDBLocal) -> DynamoDBClient:
    return make_ddb_client(dynamodb_local.endpoint)


def lease_ended_under_skew(
    client: DynamoDBClient, table: str, scope: str, clock: FakeClock, offset_s: float
) -> tuple[SkewedDate, IdempotencyStore, Acquisition]:
    """`holder`'s 30 s lease on `k`, just ended by this process's clock; then DynamoDB's replies
    read `offset_s` off our clock, measured by one read. Returns the store to take over with."""
    skew = SkewedDate(client)
    store = IdempotencyStore(table, client=client, clock=clock)
    held = store.acquire(scope, "k", lease_ms=30_000, owner="holder")
    assert held.status is AcquireStatus.ACQUIRED
    clock.advance(31)  # by this process's clock, the lease has just ended
    skew.offset_s = offset_s
    store.get(scope, "k")  # any reply measures it
    return skew, store, held


def test_a_clock_too_far_ahead_does_not_take_an_expired_lease_over(
    skewed_client: DynamoDBClient,
    idempotency_table: str,
    scope: str,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # DynamoDB's clock reads a minute earlier: ours runs a minute ahead
    skew, _, held = lease_ended_under_skew(skewed_client, idempotency_table, scope, clock, -60.0)
    taker = IdempotencyStore(idempotency_table, client=skewed_client, clock=clock)
    bounds = clock_skew.bounds()
    assert bounds is not None
    assert bounds[1] < -50  # certainly a minute ahead, to the Date's one-second resolution
    with caplog.at_level(logging.WARNING, logger="exactly-once"):
        refused = taker.acquire(scope, "k", lease_ms=30_000, owner="taker")
        again = taker.acquire(scope, "k", lease_ms=30_000, owner="taker")
    assert refused.status is AcquireStatus.IN_PROGRESS
    assert again.status is AcquireStatus.IN_PROGRESS
    warnings = [r for r in caplog.records if "clock is off" in r.getMessage()]
    assert len(warnings) == 1  # once, not per call
    record = taker.get(scope, "k")
    assert record is not None
    assert held.lock is not None
    assert record.lock_token == held.lock.token  # untouched: neither taken nor blocked

    skew.offset_s = None  # the clock is right again: the next reply restarts the estimate
    taker.get(scope, "k")
    taken = taker.acquire(scope, "k", lease_ms=30_000, owner="taker")
    assert taken.status is AcquireStatus.ACQUIRED
    assert taken.takeover


def test_a_blocked_takeover_is_not_marked_failed_on_a_skewed_clock(
    skewed_client: DynamoDBClient, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    """block_takeover would make the expired record FAILED for a person: not on a wrong clock."""
    _, store, _ = lease_ended_under_skew(skewed_client, idempotency_table, scope, clock, -60.0)
    blocked = store.acquire(scope, "k", lease_ms=30_000, owner="taker", block_takeover=True)
    assert blocked.status is AcquireStatus.IN_PROGRESS
    record = store.get(scope, "k")
    assert record is not None
    assert record.status.value == "IN_PROGRESS"


def test_a_skew_within_the_margin_changes_nothing(
    skewed_client: DynamoDBClient, idempotency_table: str, scope: str, clock: FakeClock
) -> None:
    # ahead by 3 s: inside the 5 s margin
    _, store, _ = lease_ended_under_skew(skewed_client, idempotency_table, scope, clock, -3.0)
    assert not clock_skew.too_far_ahead(MARGIN_MS)
    assert store.acquire(scope, "k", lease_ms=30_000, owner="taker").takeover


def test_a_clock_behind_is_warned_about_but_still_takes_over(
    skewed_client: DynamoDBClient,
    idempotency_table: str,
    scope: str,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Behind, this process sees leases end late: its takeovers are safe, only warned."""
    _, store, _ = lease_ended_under_skew(skewed_client, idempotency_table, scope, clock, 60.0)
    with caplog.at_level(logging.WARNING, logger="exactly-once"):
        taken = store.acquire(scope, "k", lease_ms=30_000, owner="taker")
    assert taken.takeover
    assert clock_skew.behind_ms() > 50_000
    assert any("clock is off" in r.getMessage() for r in caplog.records)


def test_measuring_costs_no_call(
    skewed_client: DynamoDBClient, idempotency_table: str, scope: str
) -> None:
    skew = SkewedDate(skewed_client)
    store = IdempotencyStore(idempotency_table, client=skewed_client)
    store.acquire(scope, "k", lease_ms=30_000, owner="holder")
    assert skew.requests == 1
    assert clock_skew.bounds() is not None  # measured from that one reply


def test_one_second_of_date_resolution_is_no_skew() -> None:
    """A Date truncated to the second, on a reply that took 200 ms, bounds a zero skew."""
    sent = 1_800_000_000.7
    clock_skew.observe(formatdate(1_800_000_000.8, usegmt=True), sent, sent + 0.2)
    low, high = clock_skew.bounds() or (None, None)
    assert low is not None
    assert high is not None
    assert low <= 0 <= high
    assert clock_skew.ahead_ms() == 0
    assert clock_skew.behind_ms() == 0


def test_bounds_narrow_and_a_stepped_clock_starts_again() -> None:
    base = 1_800_000_000.0
    clock_skew.observe(formatdate(base + 10, usegmt=True), base + 0.1, base + 0.3)
    clock_skew.observe(formatdate(base + 20, usegmt=True), base + 10.5, base + 10.6)
    low, high = clock_skew.bounds() or (0.0, 0.0)
    assert (low, high) == pytest.approx((9.7, 10.5))  # 9.7..10.9 and 9.4..10.5 meet
    clock_skew.observe(formatdate(base + 30, usegmt=True), base + 30.0, base + 30.1)
    low, high = clock_skew.bounds() or (0.0, 0.0)
    assert (low, high) == pytest.approx((-0.1, 1.0))  # disjoint: the clock was stepped


def test_an_unreadable_date_teaches_nothing() -> None:
    clock_skew.observe("not a date", 1.0, 2.0)
    assert clock_skew.bounds() is None


def test_configured_stores_take_the_lease_margin_as_their_limit(idempotency_table: str) -> None:
    from exactly_once.lease import LeasePolicy
    from exactly_once.sqs.config import ConsumerConfig

    config = ConsumerConfig(
        table_name=idempotency_table, scope="s", lease=LeasePolicy(margin_ms=2_500)
    )
    assert IdempotencyStore.configured(config).max_skew_ms == 2_500
