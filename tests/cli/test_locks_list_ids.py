"""`locks list` gives the whole id that `locks show` and `locks reset` take (issue 26, defect 8):
the table cut it to fit 80 columns ("orders#o-2026-…"), and there was no machine-readable form.
Against DynamoDB Local."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from exactly_once import IdempotencyStore
from tests.cli.support import Invoke
from tests.cli.test_locks import failed, stuck

if TYPE_CHECKING:
    pass


LONG_KEY = "o-2026-01-01-customer-1234567890-order-line-0001-of-0003"


def test_the_table_never_cuts_the_id_at_80_columns(
    cli: Invoke,
    store: IdempotencyStore,
    scope: str,
    at_dynamodb_local: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    stuck(store, scope, LONG_KEY)
    failed(store, scope, "short")

    result = cli("locks", "list", "--table", store.table_name)

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert sum(f"│ {scope}#{LONG_KEY} " in line for line in lines) == 1, result.stdout
    assert sum(f"│ {scope}#short " in line for line in lines) == 1, result.stdout
    assert "…" not in result.stdout


def test_json_lists_every_record_with_its_full_id(
    cli: Invoke, store: IdempotencyStore, scope: str, at_dynamodb_local: None
) -> None:
    stuck(store, scope, LONG_KEY)
    failed(store, scope, "short")

    result = cli("locks", "list", "--json", "--table", store.table_name)

    assert result.exit_code == 0, result.output
    listing = json.loads(result.stdout)
    by_id = {record["record_id"]: record for record in listing["records"]}
    assert sorted(by_id) == sorted([f"{scope}#{LONG_KEY}", f"{scope}#short"])
    assert by_id[f"{scope}#{LONG_KEY}"]["status"] == "IN_PROGRESS"
    assert by_id[f"{scope}#short"]["status"] == "FAILED"
    assert by_id[f"{scope}#short"]["error"]["type"] == "PermanentError"
    assert listing["more"] is False
    assert store.table_name in listing["source"]

    cut = json.loads(
        cli("locks", "list", "--json", "--limit", "1", "--table", store.table_name).stdout
    )
    assert len(cut["records"]) == 1
    assert cut["more"] is True


def test_a_listed_id_is_what_locks_show_takes(
    cli: Invoke, store: IdempotencyStore, scope: str, at_dynamodb_local: None
) -> None:
    failed(store, scope, LONG_KEY)
    (record,) = json.loads(cli("locks", "list", "--json", "--table", store.table_name).stdout)[
        "records"
    ]
    listed_scope, _, listed_key = record["record_id"].partition("#")

    shown = cli("locks", "show", listed_scope, listed_key, "--stored", "--table", store.table_name)

    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["record_id"] == record["record_id"]
