"""A lock held at a fork stays the parent's: the child inherits the object, never the holding.

Before, a child forked while its parent held a key could `succeed` it with the parent's token,
and the parent's own `succeed` then read the stored COMPLETED as its own lost reply and returned
normally although the child's result was stored. Now every write and effect made with a lock
taken before the fork is refused in the child (LockInherited), and the record stays the
parent's to complete. A real `os.fork`, on both stores.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from exactly_once import LockInherited, OnceLock, begin, effects, lifecycle
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import ErrorInfo
from exactly_once.stores.schema import Status
from tests.stores.pg_support import business_table as payments_table
from tests.stores.pg_support import ledger_rows
from tests.stores.pg_support import table_rows as rows


def in_a_forked_child(attempts: dict[str, Callable[[], Any]]) -> dict[str, str]:
    """Fork, make each attempt in the child, and return what each did there: "ok", or the
    name of the exception it raised. The child ends with os._exit (no pytest teardown)."""
    before = lifecycle.generation()
    read, write = os.pipe()
    with warnings.catch_warnings():
        # The store's pools run threads; the child uses nothing they guard.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(read)
            outcomes = {"cloned": str(lifecycle.generation() > before)}
            for name, attempt in attempts.items():
                try:
                    attempt()
                    outcomes[name] = "ok"
                except BaseException as error:
                    outcomes[name] = type(error).__name__
            os.write(write, json.dumps(outcomes).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert lifecycle.generation() == before  # the parent is not a clone
    seen: dict[str, str] = json.loads(report)
    assert seen.pop("cloned") == "True"
    return seen


def test_a_forked_child_cannot_complete_its_parents_lock(
    backend: str, store: Store, scope: str, request: pytest.FixtureRequest
) -> None:
    claim = begin(scope, "order-1", lease_s=600, store=store)
    assert claim.acquired
    lock: OnceLock = claim.lock
    stored = lock.store_lock
    table = ""
    if backend == "postgres":  # the parent's business write, open in its transaction at the fork
        dsn = request.getfixturevalue("pg_dsn")
        table = payments_table(dsn)
        lock.transaction.execute(f"INSERT INTO {table} VALUES ('order-1', 'the parent')")  # noqa: S608

    seen = in_a_forked_child(
        {
            "succeed": lambda: lock.succeed("the child's"),
            "fail": lambda: lock.fail("the child's error"),
            "extend": lambda: lock.extend(60),
            "transaction": lambda: lock.transaction,
            "context.extend_lease": lambda: lock.extend_lease(60_000),
            "store.complete": lambda: store.complete(stored, "the child's"),
            "store.fail": lambda: store.fail(stored, ErrorInfo("Child", "no", retryable=False)),
            "store.extend": lambda: store.extend(stored, 60_000),
            "store.transaction": lambda: store.transaction(stored),
            "store.discard": lambda: store.discard(stored),  # quietly nothing: not its to end
        }
    )

    record = store.get(scope, "order-1")
    assert record is not None
    assert (record.status, record.lock_token, record.fence, record.lease_expires_at_ms) == (
        Status.IN_PROGRESS,
        stored.token,
        stored.fence,
        stored.lease_expires_at_ms,
    ), "a write of the child's reached the parent's record"
    lock.succeed("the parent's")  # the parent still holds its key...
    done = store.get(scope, "order-1")
    assert done is not None
    assert (done.status, done.result) == (Status.COMPLETED, "the parent's")  # ...and its result
    if table:  # ...and its transaction, which committed with its own completion
        assert rows(request.getfixturevalue("pg_dsn"), table) == [("order-1", "the parent")]

    refused = {name: "LockInherited" for name in seen}
    refused["store.discard"] = "ok"
    if backend == "dynamodb":  # DynamoDB's store lends no transaction to anyone
        refused["store.transaction"] = "ConfigurationError"
    assert seen == refused


def test_a_forked_childs_fenced_effects_are_refused(
    backend: str, store: Store, scope: str, request: pytest.FixtureRequest
) -> None:
    """put_once on DynamoDB (mark and item in one transaction); the ledger's entry, which
    is a put_once there and a row in the holder's transaction on PostgreSQL."""
    from exactly_once import ledger

    claim = begin(scope, "order-1", lease_s=600, store=store)
    lock = claim.lock
    table = request.getfixturevalue("ledger_table") if backend == "dynamodb" else ""
    attempts: dict[str, Callable[[], Any]] = {
        "ledger.record_effect": lambda: ledger.record_effect(lock, {"paid": 1}, table=table)
    }
    if backend == "dynamodb":
        item = {"pk": {"S": "order-1"}, "sk": {"S": "payment"}}
        attempts["effects.put_once"] = lambda: effects.put_once(lock, table, item, ("pk", "sk"))

    seen = in_a_forked_child(attempts)

    assert seen == dict.fromkeys(seen, "LockInherited")
    record = store.get(scope, "order-1")
    assert record is not None
    assert (record.status, record.effect_marks) == (Status.IN_PROGRESS, {})
    lock.succeed("done")
    if backend == "dynamodb":
        ddb = request.getfixturevalue("ddb")
        assert ddb.scan(TableName=table)["Items"] == []
    else:
        assert ledger_rows(request.getfixturevalue("pg_dsn"), "order-1") == []


def test_a_lock_handed_to_another_process_is_refused_there(
    backend: str, store: Store, scope: str
) -> None:
    """Ownership is the taking process's instance id, not a count of clones: a lock pickled to
    a process that did not take it (a sibling fork child, a spawned worker) is refused too,
    and the holder still completes it."""
    import pickle

    claim = begin(scope, "order-handed", lease_s=600, store=store)
    stored = claim.lock.store_lock
    handed = pickle.loads(pickle.dumps(stored))  # noqa: S301 - our own bytes
    assert not handed.inherited  # still the taker's, in the taker's process
    lifecycle_instance = lifecycle.instance_id()
    try:
        lifecycle._instance = "a-sibling"  # what any other process's id is: not the taker's
        assert handed.inherited
        with pytest.raises(LockInherited):
            store.complete(handed, "the sibling's")
    finally:
        lifecycle._instance = lifecycle_instance
    claim.lock.succeed("the holder's")
    record = store.get(scope, "order-handed")
    assert record is not None
    assert record.result == "the holder's"
