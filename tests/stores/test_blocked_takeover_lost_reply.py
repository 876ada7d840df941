"""A blocked takeover whose own write's reply was lost is still a blocked takeover.

Found by the batch model (batch_model.py): an acquire with `block_takeover` meets a record whose
holder died long ago (its TTL passed too) and which was written with another fingerprint. The
acquire marks it FAILED for a person (the block); that write commits and its reply is lost, so
botocore (DynamoDB) or the store's reconnect (PostgreSQL) sends it again. The retry is refused
by the block's own new token, and the refusal used to be judged as another holder's record:
live again, with another fingerprint, so FINGERPRINT_MISMATCH, without the replay nonce the
dead-lettered message must carry. A retried write must recognise its own: FAILED_PERMANENTLY,
with that nonce, as without the fault.
"""

from __future__ import annotations

from typing import Any

import pytest

from exactly_once.stores.protocol import Store
from exactly_once.stores.records import AcquireStatus
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock, make_ddb_client

LEASE_MS = 10_000
TTL_S = 120


@pytest.fixture(params=["dynamodb", "postgres"])
def stores(request: pytest.FixtureRequest, clock: FakeClock) -> tuple[Store, Store, list[str]]:
    """(a healthy store, one whose block write's first reply is lost, the faults it met)."""
    met: list[str] = []
    if request.param == "dynamodb":
        from exactly_once.stores.dynamodb.store import IdempotencyStore
        from fault_injection.lost_replies import install_lost_replies

        table = request.getfixturevalue("idempotency_table")
        client = make_ddb_client(request.getfixturevalue("dynamodb_local").endpoint, 2)
        updates: list[str] = []

        def lose(operation: str) -> bool:
            # The acquire's UpdateItem is refused (the TTL passed); the next one is the block.
            if operation != "UpdateItem":
                return False
            updates.append(operation)
            hit = len(updates) == 2
            if hit:
                met.append("block reply lost")
            return hit

        install_lost_replies(client, lose)
        ddb = request.getfixturevalue("ddb")
        healthy = IdempotencyStore(table, client=ddb, clock=clock, record_ttl_s=TTL_S)
        faulty = IdempotencyStore(table, client=client, clock=clock, record_ttl_s=TTL_S)
        return healthy, faulty, met
    from exactly_once.stores.postgres.store import PostgresStore
    from fault_injection.pg_faults import faulty_store_pools

    dsn = request.getfixturevalue("pg_dsn")

    def decide(kind: str) -> str | None:
        if kind == "write" and not met:  # the BLOCK statement
            met.append("block reply lost")
            return "lose"
        return None

    settings: dict[str, Any] = {"clock": clock, "record_ttl_s": TTL_S}
    healthy_pg = PostgresStore(dsn, **settings)
    faulty_pg = PostgresStore(dsn, **settings, **faulty_store_pools(dsn, decide))
    return healthy_pg, faulty_pg, met


def test_the_retried_block_is_recognised_as_its_own(
    stores: tuple[Store, Store, list[str]], clock: FakeClock, scope: str
) -> None:
    healthy, faulty, met = stores
    held = healthy.acquire(scope, "k", lease_ms=LEASE_MS, owner="died", fingerprint="fb")
    assert held.acquired
    clock.advance(TTL_S + LEASE_MS / 1000 + 61)  # its lease, then its TTL, passed
    got = faulty.acquire(
        scope, "k", lease_ms=LEASE_MS, owner="next", fingerprint="fa", block_takeover=True
    )
    assert met == ["block reply lost"]
    stored = healthy.get(scope, "k")
    assert stored is not None
    assert stored.status is Status.FAILED  # blocked for a person
    assert got.status is AcquireStatus.FAILED_PERMANENTLY, got
    assert got.record is not None
    assert got.record.replay_nonce == stored.replay_nonce is not None
