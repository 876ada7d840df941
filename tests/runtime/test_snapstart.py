"""SnapStart: copies restored from one snapshot must not share identity, randomness or sockets.

The runtime's `snapshot_restore_py` exists only in Lambda, so a stand-in records the hooks the
layer registers; a "restore" puts the process back into the snapshot's state (the `random`
state as it was when the snapshot was taken) and runs the after-restore hooks, as each copy
would. Both stores then work with fresh clients and pools.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from exactly_once import clients, lifecycle
from exactly_once.sqs.batch import _pool
from exactly_once.stores.protocol import Store


class Hooks:
    """What Lambda's `snapshot_restore_py` offers: registration of the two kinds of hook."""

    def __init__(self) -> None:
        self.before: list[Callable[[], Any]] = []
        self.after: list[Callable[[], Any]] = []

    def register_before_snapshot(self, hook: Callable[[], Any]) -> None:
        self.before.append(hook)

    def register_after_restore(self, hook: Callable[[], Any]) -> None:
        self.after.append(hook)

    def snapshot(self) -> object:
        for hook in self.before:
            hook()
        return random.getstate()

    def restore(self, state: object) -> None:
        random.setstate(state)  # type: ignore[arg-type]  # the copy starts from the snapshot's
        for hook in self.after:
            hook()


@pytest.fixture
def hooks() -> Hooks:
    found = Hooks()
    lifecycle.install(found)
    lifecycle.install(found)  # installing twice registers nothing twice
    assert (len(found.before), len(found.after)) == (1, 1)
    return found


def test_each_restored_copy_gets_its_own_identity_and_random_numbers(hooks: Hooks) -> None:
    before = lifecycle.instance_id()
    state = hooks.snapshot()
    seen: list[tuple[str, int, list[float]]] = []
    for _ in range(2):
        hooks.restore(state)
        seen.append(
            (lifecycle.instance_id(), lifecycle.generation(), [random.random() for _ in range(3)])
        )
    (first_id, first_gen, first_draw), (second_id, second_gen, second_draw) = seen
    assert len({before, first_id, second_id}) == 3
    assert second_gen > first_gen
    assert first_draw != second_draw  # without the re-seed both copies draw the same numbers


@pytest.fixture
def own_store(
    backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Store:
    """A store that makes its own client or pools, as a handler's store does at init."""
    if backend == "dynamodb":
        from exactly_once.stores.dynamodb.store import IdempotencyStore

        local = request.getfixturevalue("dynamodb_local")
        monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", local.endpoint)
        return IdempotencyStore(request.getfixturevalue("idempotency_table"))
    from exactly_once.stores.postgres.store import PostgresStore

    return PostgresStore(request.getfixturevalue("pg_dsn"))


def test_clients_are_closed_before_the_snapshot_and_made_again_after_it(
    hooks: Hooks, own_store: Store, scope: str
) -> None:
    """On either backend (the DynamoDB store's client, the PostgreSQL store's pools) a store
    made at init, before the snapshot, works after the restore on connections of its own."""
    store = own_store
    held = store.acquire(scope, "before", lease_ms=60_000, owner="init")
    assert held.acquired
    shared = clients.dynamodb()
    threads = _pool(3)
    state = hooks.snapshot()
    assert clients._clients == {}  # closed and dropped: nothing for a copy to inherit
    hooks.restore(state)
    assert clients.dynamodb() is not shared
    assert _pool(3) is not threads
    after = store.acquire(scope, "after", lease_ms=60_000, owner="restored")
    assert after.acquired
    assert after.lock is not None
    assert held.lock is not None
    assert after.lock.token != held.lock.token
    assert store.complete(after.lock, "ok").ok
