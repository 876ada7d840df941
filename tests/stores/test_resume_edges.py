"""`resume_id` at the record's TTL edge, on both stores.

A record whose TTL passed counts as absent, but an IN_PROGRESS one with `block_takeover` is
still made FAILED for a person (its holder may have paid), and both stores must say the same
thing about what a replay's acquire did.
"""

from __future__ import annotations

from exactly_once.stores.protocol import Store
from exactly_once.stores.records import AcquireStatus
from tests.conftest import FakeClock

LEASE_MS = 60_000
ARN = "arn:aws:lambda:eu-west-1:123456789012:function:f:$LATEST/durable-execution/e1/x"
PAST_THE_TTL_S = 30 * 86_400


def test_a_lapsed_record_without_resume_id_is_still_blocked_not_taken_over(
    store: Store, scope: str, clock: FakeClock
) -> None:
    """PostgreSQL's TTL branch gained `r.resume_id IS DISTINCT FROM %(rid)s`, which is false
    when neither side names an execution (NULL vs NULL): the whole guard dropped and a plain
    blocked acquire took the record over, where DynamoDB (and PostgreSQL before) blocks it."""
    assert store.acquire(scope, "k", lease_ms=LEASE_MS, owner="o", block_takeover=True).acquired
    clock.advance(PAST_THE_TTL_S)
    again = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="o2", block_takeover=True)
    assert again.status is AcquireStatus.FAILED_PERMANENTLY


def test_both_stores_say_the_same_about_a_resume_after_the_ttl(
    store: Store, scope: str, clock: FakeClock
) -> None:
    """The replay of an execution that waited past the record's TTL: PostgreSQL's ON CONFLICT
    reports `resumed` (the row was its own IN_PROGRESS lock), DynamoDB's `_renew` does not."""
    assert store.acquire(scope, "k", lease_ms=LEASE_MS, owner="o", resume_id=ARN).acquired
    clock.advance(PAST_THE_TTL_S)
    again = store.acquire(scope, "k", lease_ms=LEASE_MS, owner="o", resume_id=ARN)
    assert again.acquired
    assert (again.resumed, again.takeover) == (True, False)
