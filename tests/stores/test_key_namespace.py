"""Hashed keys and plain keys never share a record, on both stores.

A key that cannot be stored as it is (over 1 KiB, not UTF-8, or, on PostgreSQL, with a NUL) is
kept as `sha256:<digest>`. A plain key that happens to read `sha256:<digest of K>` must not name
K's record: it would be answered with K's stored result (a replay of someone else's answer) and
never run. Such a plain key is hashed too, at every entry point that has no caller prefix
(`once`/`begin`, the queue consumer and the SNS subscriber, which resolve keys alike).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exactly_once import ClaimStatus, Outcome, RecordContext, begin, sqs_consumer
from exactly_once.keys import storable_key
from exactly_once.stores.codec import sha256_hex
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import AcquireStatus
from tests.consumer.conftest import event, lambda_context, sqs_record

HIDDEN = {
    "long": "x" * 2000,  # over the 1 KiB a partition key may take
    "lone-surrogate": "k-\ud83d",  # valid JSON, not UTF-8
    "nul": "k-\x00-1",  # PostgreSQL text cannot hold it
}


def alias_of(key: str) -> str:
    """The plain key a client would send to reach `key`'s record, were namespaces shared."""
    return "sha256:" + sha256_hex(key)


@pytest.mark.parametrize("hidden", HIDDEN.values(), ids=HIDDEN.keys())
def test_a_plain_sha256_key_does_not_reach_the_hashed_keys_record(
    store: Store, scope: str, hidden: str
) -> None:
    first = begin(scope, hidden, lease_s=60, store=store)
    assert first.acquired
    first.lock.succeed({"secret": "the first key's result"})
    assert begin(scope, hidden, lease_s=60, store=store).status is ClaimStatus.COMPLETED

    alias = begin(scope, alias_of(hidden), lease_s=60, store=store)
    assert alias.status is ClaimStatus.ACQUIRED, f"answered with {alias.result!r}"
    assert alias.key != first.key


@pytest.mark.parametrize("hidden", HIDDEN.values(), ids=HIDDEN.keys())
def test_a_plain_sha256_key_from_a_queue_runs_its_own_record(
    backend: str, request: pytest.FixtureRequest, scope: str, hidden: str
) -> None:
    """The queue consumer (and the SNS subscriber, which resolves keys the same way)."""
    if backend == "dynamodb":
        where: dict[str, Any] = {
            "table_name": request.getfixturevalue("idempotency_table"),
            "dynamodb_client": request.getfixturevalue("ddb"),
        }
    else:
        where = {"dsn": request.getfixturevalue("pg_dsn")}
    ran: list[str] = []

    def handle(body: Any, ctx: RecordContext) -> str:
        ran.append(body["orderId"])
        return f"charged {body['orderId']!r}"

    consumer = sqs_consumer(
        key="orderId", scope=scope, sqs_client=request.getfixturevalue("sqs"), **where
    )(handle)
    for key in (hidden, alias_of(hidden)):
        answer = consumer(event(sqs_record({"orderId": key})), lambda_context())
        assert answer == {"batchItemFailures": []}
        assert [r.outcome for r in consumer.last_results] == [Outcome.PROCESSED]
    assert ran == [hidden, alias_of(hidden)]


@pytest.mark.parametrize("hidden", HIDDEN.values(), ids=HIDDEN.keys())
def test_a_plain_sha256_resume_id_does_not_resume_another_holders_lock(
    store: Store, scope: str, hidden: str
) -> None:
    """PostgreSQL keeps a resume id it cannot hold as text hashed, as keys are."""
    held = store.acquire(scope, "k", lease_ms=60_000, owner="o", resume_id=hidden)
    assert held.acquired
    other = store.acquire(scope, "k", lease_ms=60_000, owner="o", resume_id=alias_of(hidden))
    assert other.status is AcquireStatus.IN_PROGRESS
    assert not other.resumed


# Short keys, keys over the limit and keys that are not UTF-8 (lone surrogates).
KEYS = st.one_of(
    st.text(),
    st.text(min_size=1, max_size=4).map(lambda s: s * 400),
    st.text(st.characters(categories=["Cs", "Ll", "Nd"]), min_size=1),
)


@given(KEYS)
def test_no_plain_key_is_stored_as_another_keys_hash(key: str) -> None:
    assert storable_key(alias_of(key)) != storable_key(key)
    stored = storable_key(key)
    # Kept as it is, or hashed; never a plain key that reads like a hashed one.
    assert stored == key or stored == alias_of(key)
    assert stored != key or not key.startswith("sha256:")


@given(KEYS, KEYS)
def test_two_keys_never_share_a_stored_form(a: str, b: str) -> None:
    if a != b:
        assert storable_key(a) != storable_key(b)
