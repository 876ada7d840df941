"""The execution log on PostgreSQL (`exactly_once.ledger.append_effect`): a row per execution,
written in the holder's transaction, so it commits with the completion and a zombie's rolls
back with its refused one. The rows per key count executions that took effect: with the
harness's lock-off switch, a second execution of a key shows as a second row."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from exactly_once import IdempotencyStore, LeaseLost, begin
from exactly_once.ledger import append_effect
from exactly_once.stores.postgres.store import PostgresStore
from local_aws import lock_off
from tests.conftest import FakeClock


@pytest.fixture
def pg_store(pg_dsn: str, clock: FakeClock) -> PostgresStore:
    return PostgresStore(pg_dsn, clock=clock)


def rows(dsn: str, key: str) -> list[tuple[str, int, str]]:
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            "SELECT sk, fence, detail FROM exactly_once.ledger WHERE pk = %s ORDER BY fence",
            (key,),
        ).fetchall()
    return [(str(sk), int(fence), str(detail)) for sk, fence, detail in found]


def test_each_execution_is_a_row_of_its_own_committed_with_the_completion(
    pg_store: PostgresStore, pg_dsn: str, scope: str
) -> None:
    key = f"log-{uuid.uuid4().hex[:8]}"
    claim = begin(scope, key, store=pg_store, lease_s=30)
    written = append_effect(claim.lock, {"n": 1})
    assert rows(pg_dsn, key) == []  # not before the completion commits
    claim.lock.succeed("done")
    [(sk, fence, detail)] = rows(pg_dsn, key)
    assert written == sk
    assert sk.startswith(f"{scope}#effect#")
    assert fence == claim.lock.fence
    assert json.loads(detail)["execution"]["id"] == sk.rsplit("#", 1)[1]


def test_a_zombies_row_rolls_back_with_its_refused_completion(
    pg_store: PostgresStore, pg_dsn: str, scope: str, clock: FakeClock
) -> None:
    key = f"log-{uuid.uuid4().hex[:8]}"
    zombie = begin(scope, key, store=pg_store, lease_s=1)
    append_effect(zombie.lock, {"by": "zombie"})
    clock.advance(2)  # its lease ends while it is frozen
    successor = begin(scope, key, store=pg_store, lease_s=30)
    assert successor.takeover
    append_effect(successor.lock, {"by": "successor"})
    successor.lock.succeed("done")
    with pytest.raises(LeaseLost):
        zombie.lock.succeed("stale")
    assert [fence for _, fence, _ in rows(pg_dsn, key)] == [successor.lock.fence]


def test_with_the_lock_off_a_second_execution_shows_as_a_second_row(
    pg_store: PostgresStore, pg_dsn: str, scope: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for store in (IdempotencyStore, PostgresStore):
        monkeypatch.setattr(store, "acquire", store.acquire)  # restored at teardown
        monkeypatch.setattr(store, "acquire_many", store.acquire_many)
    lock_off.install()
    key = f"log-{uuid.uuid4().hex[:8]}"
    for _ in range(2):
        claim = begin(scope, key, store=pg_store, lease_s=30)
        assert claim.acquired  # never a duplicate: every acquire gets a record of its own
        append_effect(claim.lock, {})
        claim.lock.succeed("done")
    assert len(rows(pg_dsn, key)) == 2
