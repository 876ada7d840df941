"""Exactly one of many racing callers gets the lock, and a holder that outlived its lease (a
zombie) can neither record an outcome over its successor nor apply its effect."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from exactly_once import Claim, ClaimStatus, IdempotencyStore, Status, begin, once
from exactly_once.effects import LeaseLost, put_once
from exactly_once.ledger import record_effect
from tests.conftest import FakeClock
from tests.once.conftest import run

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

RACERS = 32


@pytest.mark.parametrize("round_", range(3))
def test_32_threads_race_on_one_key_and_exactly_one_acquires(
    ddb: DynamoDBClient, idempotency_table: str, scope: str, round_: int
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb)  # the real clock: real contention
    start = threading.Barrier(RACERS)
    won = threading.Event()

    def race(n: int) -> Claim:
        start.wait()
        claim = begin(scope, "k", store=store, owner=f"racer-{n}", expected_duration_s=30)
        if claim.acquired:
            claim.lock.succeed(n)
            won.set()
        return claim

    with ThreadPoolExecutor(RACERS) as pool:
        claims = list(pool.map(race, range(RACERS)))
    statuses = Counter(c.status for c in claims)
    assert statuses[ClaimStatus.ACQUIRED] == 1, statuses
    assert set(statuses) <= {ClaimStatus.ACQUIRED, ClaimStatus.IN_PROGRESS, ClaimStatus.COMPLETED}
    (winner,) = [c for c in claims if c.acquired]
    winner_n = int(winner.lock.owner.removeprefix("racer-"))
    for claim in claims:
        if claim.status is ClaimStatus.COMPLETED:
            assert claim.result == winner_n
        if claim.status is ClaimStatus.IN_PROGRESS:
            assert claim.owner == winner.lock.owner
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.attempts, record.result) == (Status.COMPLETED, 1, winner_n)


@pytest.fixture
def zombie_and_successor(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> tuple[Claim, Claim]:
    zombie = begin(scope, "k", lease_s=10, store=store, owner="zombie")
    clock.advance(11)  # the zombie froze past its lease
    successor = begin(scope, "k", store=store, owner="successor")
    assert successor.acquired
    assert successor.takeover
    assert successor.lock.fence > zombie.lock.fence
    return zombie, successor


def test_a_zombie_cannot_succeed_over_its_successor(
    store: IdempotencyStore, scope: str, zombie_and_successor: tuple[Claim, Claim]
) -> None:
    zombie, successor = zombie_and_successor
    with pytest.raises(LeaseLost, match="successor"):
        zombie.lock.succeed("zombie's")
    assert zombie.lock.outcome is None
    successor.lock.succeed("successor's")
    with pytest.raises(LeaseLost):
        zombie.lock.succeed("zombie's, again")  # retrying cannot help it either
    again = begin(scope, "k", store=store)
    assert (again.status, again.result) == (ClaimStatus.COMPLETED, "successor's")


@pytest.mark.parametrize("call", ["fail", "extend"])
def test_a_zombie_cannot_fail_or_extend_the_successors_lock(
    store: IdempotencyStore, scope: str, zombie_and_successor: tuple[Claim, Claim], call: str
) -> None:
    zombie, successor = zombie_and_successor
    write: Callable[[], object] = {
        "fail": lambda: zombie.lock.fail("zombie's error", retryable=False),
        "extend": lambda: zombie.lock.extend(600),
    }[call]
    with pytest.raises(LeaseLost):
        write()
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.owner, record.error) == (Status.IN_PROGRESS, "successor", None)
    assert record.lease_expires_at_ms == successor.lock.lease_ends_at * 1000


def test_a_zombies_effect_is_refused_and_the_successors_applies_once(
    store: IdempotencyStore,
    scope: str,
    ledger_table: str,
    zombie_and_successor: tuple[Claim, Claim],
    ddb: DynamoDBClient,
) -> None:
    zombie, successor = zombie_and_successor
    item = {"pk": {"S": f"{scope}#k"}, "sk": {"S": "charge"}}
    with pytest.raises(LeaseLost):
        put_once(zombie.lock, ledger_table, item)
    assert put_once(successor.lock, ledger_table, item) is True
    assert put_once(successor.lock, ledger_table, item) is True  # its own, again: still one
    sort_key = record_effect(successor.lock, {"amount": 5}, table=ledger_table)
    assert sort_key == f"{scope}#effect"
    entries = ddb.scan(TableName=ledger_table)["Items"]
    assert len(entries) == 2
    (entry,) = [e for e in entries if e["sk"]["S"] == sort_key]
    assert entry["message_id"]["S"] == "successor"  # the lock's origin is its owner
    assert entry["fence"]["N"] == str(successor.lock.fence)


def test_a_zombie_block_learns_it_lost_and_writes_nothing(
    store: IdempotencyStore, scope: str, clock: FakeClock, ledger_table: str
) -> None:
    def body(zombie: Claim) -> None:
        clock.advance(11)
        begin(scope, "k", store=store, owner="successor")
        put_once(zombie.lock, ledger_table, {"pk": {"S": "k"}, "sk": {"S": "x"}})

    with pytest.raises(LeaseLost):
        run(once(scope, "k", lease_s=10, store=store), body)
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.owner) == (Status.IN_PROGRESS, "successor")


def test_a_zombie_block_that_returns_gets_lease_lost_at_the_exit(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    def body(zombie: Claim) -> None:
        clock.advance(11)
        begin(scope, "k", store=store, owner="successor").lock.succeed("theirs")

    with pytest.raises(LeaseLost):
        run(once(scope, "k", lease_s=10, store=store), body)
    assert begin(scope, "k", store=store).result == "theirs"


def test_a_zombie_block_that_raises_keeps_its_error_and_leaves_the_successor_alone(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    def body(zombie: Claim) -> None:
        clock.advance(11)
        begin(scope, "k", store=store, owner="successor")
        raise ZeroDivisionError  # its `fail` is refused (logged); this error propagates

    with pytest.raises(ZeroDivisionError):
        run(once(scope, "k", lease_s=10, store=store), body)
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.owner, record.error) == (Status.IN_PROGRESS, "successor", None)
