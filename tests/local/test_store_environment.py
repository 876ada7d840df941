"""Which store a local function process selects: the function's variables decide, on PostgreSQL
the DSN replaces the table, and an inherited selector of the other store goes."""

from __future__ import annotations

from local_aws.store_environment import apply_function_environment, on_postgres

DEPLOYED = {"IDEMPOTENCY_TABLE": "idem", "LEDGER_TABLE": "ledger", "CONSUMER_SCOPE": "orders"}
DSN = "host=127.0.0.1 port=5 dbname=postgres user=postgres"


def test_on_postgres_the_dsn_takes_the_tables_place() -> None:
    assert on_postgres(DEPLOYED, DSN) == {
        "IDEMPOTENCY_DSN": DSN,
        "LEDGER_TABLE": "ledger",
        "CONSUMER_SCOPE": "orders",
    }
    assert DEPLOYED["IDEMPOTENCY_TABLE"] == "idem"  # the deployed variables are left alone


def test_a_function_on_postgres_drops_an_inherited_table() -> None:
    environ = {"IDEMPOTENCY_TABLE": "from-the-shell", "PATH": "/bin"}
    apply_function_environment(environ, on_postgres(DEPLOYED, DSN))
    assert "IDEMPOTENCY_TABLE" not in environ
    assert environ["IDEMPOTENCY_DSN"] == DSN
    assert environ["PATH"] == "/bin"


def test_a_function_on_the_table_drops_an_inherited_dsn() -> None:
    environ = {"IDEMPOTENCY_DSN": DSN}
    apply_function_environment(environ, DEPLOYED)
    assert environ == DEPLOYED


def test_a_function_naming_no_store_keeps_what_it_inherits() -> None:
    environ = {"IDEMPOTENCY_TABLE": "set-by-the-harness"}
    apply_function_environment(environ, {"CONSUMER_SCOPE": "orders"})
    assert environ == {"IDEMPOTENCY_TABLE": "set-by-the-harness", "CONSUMER_SCOPE": "orders"}
