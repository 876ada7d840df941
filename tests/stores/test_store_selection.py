"""Which store the configuration picks, and that the DynamoDB path never loads PostgreSQL code."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from exactly_once import ConfigurationError
from exactly_once.http.config import ApiConfig
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.postgres.store import PostgresStore
from exactly_once.stores.protocol import open_store


@pytest.fixture(autouse=True)
def _no_store_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)
    monkeypatch.delenv("IDEMPOTENCY_DSN", raising=False)


def test_a_table_selects_dynamodb_and_a_dsn_selects_postgresql(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("IDEMPOTENCY_TABLE", "records")
    store = open_store(ConsumerConfig.resolve({"scope": "s"}))
    assert isinstance(store, IdempotencyStore)
    assert (store.backend, store.name) == ("dynamodb", "records")
    monkeypatch.delenv("IDEMPOTENCY_TABLE")
    monkeypatch.setenv("IDEMPOTENCY_DSN", "postgresql://app:pw@db.example/orders")
    store = open_store(ApiConfig.resolve({"scope": "s"}))
    assert isinstance(store, PostgresStore)
    assert (store.backend, store.name) == ("postgres", "postgresql://db.example:5432/orders")


def test_an_argument_wins_over_the_other_stores_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IDEMPOTENCY_TABLE", "records")
    store = open_store(ConsumerConfig.resolve({"scope": "s", "dsn": "host=db"}))
    assert isinstance(store, PostgresStore)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({}, "set IDEMPOTENCY_TABLE .DynamoDB. or IDEMPOTENCY_DSN .PostgreSQL."),
        ({"IDEMPOTENCY_TABLE": "t", "IDEMPOTENCY_DSN": "host=db"}, "pick one"),
    ],
)
def test_no_store_or_two_stores_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], message: str
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError, match=message):
        open_store(ConsumerConfig.resolve({"scope": "s"}))


def test_a_dynamodb_consumer_never_imports_postgresql_code() -> None:
    """The DynamoDB path's cold start is what it was: no psycopg, no PostgreSQL store."""
    script = (
        "import json, sys\n"
        "from exactly_once import sqs_consumer\n"
        "from exactly_once.stores.protocol import open_store\n"
        "handler = sqs_consumer(key='id')(lambda body, ctx: None)\n"
        "open_store(handler.processor().config)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'psycopg'"
        " or m.startswith('exactly_once.stores.postgres'))))\n"
    )
    env = {**os.environ, "IDEMPOTENCY_TABLE": "records", "CONSUMER_SCOPE": "orders"}
    env.pop("IDEMPOTENCY_DSN", None)
    ran = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[-1]) == []
