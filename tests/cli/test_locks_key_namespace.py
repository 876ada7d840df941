"""`locks show` and `locks reset` name a record by its business key, stored as the entry points
store it (keys.storable_key): a key over 1 KiB, not UTF-8 or starting with `sha256:` is hashed.

Read raw, `locks reset orders sha256:<digest of K>` (a business key that reads like a hashed
one) reset K's record: the operator answered one key and freed another, the very aliasing the
hashed-key namespace rule forbids at the entry points. `--stored` takes the key as stored, as
`locks list` prints it after `SCOPE#` (a hashed key, an HTTP caller-scoped key).
"""

from __future__ import annotations

import json

import pytest

from exactly_once import ErrorInfo, Status, begin
from exactly_once.stores.codec import sha256_hex
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.postgres.migrations import migrate
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.protocol import Store
from tests.cli.support import Invoke

LONG = "o-" + "x" * 2000  # stored as sha256:<digest>: over the 1 KiB a partition key may take
ALIAS = "sha256:" + sha256_hex(LONG)  # a plain business key that reads as LONG's stored form


def failed(store: Store, scope: str, key: str) -> str:
    """A permanently FAILED record for `key`, written as `once` writes it; its stored key."""
    claim = begin(scope, key, lease_s=10, store=store)
    assert claim.lock is not None
    claim.lock.fail(ErrorInfo("PermanentError", "bad data", retryable=False))
    return claim.key


def runs_again(store: Store, scope: str, key: str) -> bool:
    """Whether the next `once` with `key` runs (the lock it takes is given back at once)."""
    claim = begin(scope, key, lease_s=10, store=store)
    if claim.lock is not None:
        claim.lock.succeed("ran again")
    return claim.acquired


@pytest.fixture(params=["dynamodb", "postgres"])
def target(request: pytest.FixtureRequest) -> tuple[Store, list[str]]:
    """A store and the CLI options that point `locks` at it."""
    if request.param == "dynamodb":
        request.getfixturevalue("dynamodb_local")
        table = request.getfixturevalue("fresh_idempotency_table")
        request.getfixturevalue("monkeypatch").setenv(
            "AWS_ENDPOINT_URL_DYNAMODB", request.getfixturevalue("dynamodb_local").endpoint
        )
        return IdempotencyStore(table, client=request.getfixturevalue("ddb")), ["--table", table]
    dsn = request.getfixturevalue("new_database")
    migrate(dsn)
    return PostgresStore(dsn), ["--dsn", dsn]


def test_reset_of_a_sha256_business_key_never_resets_the_key_it_hashes(
    cli: Invoke, target: tuple[Store, list[str]], scope: str
) -> None:
    store, where = target
    stored = failed(store, scope, LONG)
    assert stored == ALIAS  # LONG's record is the one ALIAS would name, read raw

    reset = cli("locks", "reset", scope, ALIAS, *where)

    assert reset.exit_code == 2, reset.output  # ALIAS has no record: nothing to reset
    record = store.get(scope, stored)
    assert record is not None
    assert record.status is Status.FAILED, "LONG's record was reset"


def test_show_and_reset_find_business_keys_that_are_stored_hashed(
    cli: Invoke, target: tuple[Store, list[str]], scope: str
) -> None:
    store, where = target
    for key in (LONG, ALIAS, "sha256:o-1"):
        stored = failed(store, scope, key)
        assert stored != key  # hashed by the entry point

        shown = cli("locks", "show", scope, key, *where)
        assert shown.exit_code == 0, shown.output
        assert json.loads(shown.stdout)["record_id"] == f"{scope}#{stored}"

        reset = cli("locks", "reset", scope, key, *where)
        assert reset.exit_code == 0, reset.output
        assert runs_again(store, scope, key)


def test_stored_takes_the_key_as_locks_list_prints_it(
    cli: Invoke, target: tuple[Store, list[str]], scope: str
) -> None:
    store, where = target
    stored = failed(store, scope, LONG)

    hashed_again = cli("locks", "show", scope, stored, *where)
    assert hashed_again.exit_code == 2  # as a business key it names another record
    assert "--stored" in hashed_again.output  # and the error says how to name this one

    shown = cli("locks", "show", scope, stored, "--stored", *where)
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["status"] == "FAILED"

    reset = cli("locks", "reset", scope, stored, "--stored", *where)
    assert reset.exit_code == 0, reset.output
    assert runs_again(store, scope, LONG)
