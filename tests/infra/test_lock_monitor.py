"""The stuck-lock monitor against DynamoDB Local, on a table built from the synthesized template,
and against PostgreSQL with the variables the PostgreSQL stack gives it."""

from __future__ import annotations

import importlib
import json
import logging
import sys
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import ErrorInfo, StoredRecord
from exactly_once.stores.schema import Status
from exactly_once_ops.lambda_context import LocalLambdaContext
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.postgres_server import PostgresServer
from tests.infra.conftest import Synth

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@pytest.fixture
def table_from_template(default_synth: Synth, ddb: DynamoDBClient) -> str:
    """The idempotency table exactly as the stack defines it (keys, attributes, index)."""
    props = default_synth.props("AWS::DynamoDB::Table", "TablesIdempotency")
    name = f"monitor-{uuid.uuid4().hex[:10]}"
    ddb.create_table(
        TableName=name,
        **{
            key: props[key]
            for key in (
                "KeySchema",
                "AttributeDefinitions",
                "BillingMode",
                "GlobalSecondaryIndexes",
            )
        },
    )
    return name


@pytest.fixture
def handler(
    default_synth: Synth,
    table_from_template: str,
    dynamodb_local: DynamoDBLocal,
    monkeypatch: pytest.MonkeyPatch,
) -> ModuleType:
    """Import the handler under the environment the stack gives it, pointed at the local table."""
    env = default_synth.props("AWS::Lambda::Function", "LockMonitorFunction")["Environment"]
    for name, value in env["Variables"].items():
        monkeypatch.setenv(name, value if isinstance(value, str) else table_from_template)
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    sys.modules.pop("exactly_once_cdk.monitor_function.handler", None)
    return importlib.import_module("exactly_once_cdk.monitor_function.handler")


def seed(store: Store, scope: str) -> dict[str, str]:
    """One record in each state the monitor must tell apart; returns their ids by role."""
    stuck = store.acquire(scope, "stuck", lease_ms=-1_000, owner="crashed")
    live = store.acquire(scope, "live", lease_ms=600_000, owner="running")
    # Expected done a second ago, its lease still live for 10 minutes: slow, not dead.
    slow = store.acquire(scope, "slow", lease_ms=600_000, owner="slow", expected_duration_ms=-1_000)
    assert slow.acquired
    failed = store.acquire(scope, "failed", lease_ms=60_000, owner="x")
    assert failed.lock is not None
    assert store.fail(failed.lock, ErrorInfo("Boom", "permanent", retryable=False)).ok
    done = store.acquire(scope, "done", lease_ms=60_000, owner="x")
    assert done.lock is not None
    assert store.complete(done.lock, {"ok": True}).ok
    assert stuck.acquired
    assert live.acquired
    return {role: f"{scope}#{role}" for role in ("stuck", "live", "slow", "failed", "done")}


def emitted(output: str) -> list[dict[str, Any]]:
    """The JSON lines on stdout, where Powertools prints its EMF metric blobs."""
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_counts_stuck_and_failed_records(
    handler: ModuleType,
    table_from_template: str,
    ddb: DynamoDBClient,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = seed(IdempotencyStore(table_from_template, client=ddb), "orders")

    result = handler.handle({"source": "aws.events"}, LocalLambdaContext("lock-monitor"))

    assert result == {"StuckLocks": 1, "OverdueWork": 1, "FailedRecords": 1}
    lines = emitted(capsys.readouterr().out)
    (blob,) = [line for line in lines if "_aws" in line]
    (directive,) = blob["_aws"]["CloudWatchMetrics"]
    # The alarm watches exactly this namespace and dimension set (see test_template).
    assert directive["Namespace"] == "ExactlyOnce"
    assert directive["Dimensions"] == [["service"]]
    assert blob["service"] == "lock_monitor"
    assert (blob["StuckLocks"], blob["OverdueWork"], blob["FailedRecords"]) == (
        [1.0],
        [1.0],
        [1.0],
    )
    # Log lines go through `logging` (Powertools binds its stream at import, so read caplog).
    warnings = {
        r.__dict__["metric"]: r.__dict__ for r in caplog.records if r.levelno == logging.WARNING
    }
    assert warnings["StuckLocks"]["sample_ids"] == [ids["stuck"]]
    assert warnings["FailedRecords"]["sample_ids"] == [ids["failed"]]
    assert warnings["OverdueWork"]["sample_ids"] == [ids["slow"]]
    assert warnings["StuckLocks"]["by_scope"] == {"orders": 1}


def test_reports_zero_when_nothing_is_pending(
    handler: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert handler.handle({}, LocalLambdaContext("lock-monitor")) == {
        "StuckLocks": 0,
        "OverdueWork": 0,
        "FailedRecords": 0,
    }
    (blob,) = [line for line in emitted(capsys.readouterr().out) if "_aws" in line]
    # 0 keeps the alarms fed: StuckLocks treats a missing datapoint as a monitor that stopped
    assert (blob["StuckLocks"], blob["OverdueWork"], blob["FailedRecords"]) == ([0.0], [0.0], [0.0])


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[str]:
    """A database of its own, migrated: the monitor counts every record in the store."""
    import psycopg

    from exactly_once.stores.postgres import connections
    from exactly_once.stores.postgres.migrations import migrate

    name = f"monitor_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    dsn = postgres_server.dsn_for(name)
    migrate(dsn)
    yield dsn
    connections.pool(dsn).close()  # this database's pool only; other tests keep theirs
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def postgres_handler(
    postgres_synth: Synth, postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """The handler under the PostgreSQL stack's variables (IAM auth included: the token is
    signed locally and this trust-auth server ignores it), pointed at the local database."""
    from exactly_once import clients

    env = postgres_synth.props("AWS::Lambda::Function", "LockMonitorFunction")["Environment"]
    variables = env["Variables"]
    assert "IDEMPOTENCY_TABLE" not in variables
    monkeypatch.delenv("IDEMPOTENCY_TABLE", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value if isinstance(value, str) else postgres_database)
    for name, value in {
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    clients.reset()
    sys.modules.pop("exactly_once_cdk.monitor_function.handler", None)
    yield importlib.import_module("exactly_once_cdk.monitor_function.handler")
    clients.reset()  # no client made with these credentials outlives the test


def test_counts_on_postgresql_with_the_stacks_variables(
    postgres_handler: ModuleType, postgres_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    from exactly_once.stores.postgres.store import PostgresStore

    ids = seed(PostgresStore(postgres_database), "payments")

    result = postgres_handler.handle({"source": "aws.events"}, LocalLambdaContext("lock-monitor"))

    assert result == {"StuckLocks": 1, "OverdueWork": 1, "FailedRecords": 1}
    warnings = {
        r.__dict__["metric"]: r.__dict__ for r in caplog.records if r.levelno == logging.WARNING
    }
    assert warnings["StuckLocks"]["sample_ids"] == [ids["stuck"]]
    assert warnings["OverdueWork"]["sample_ids"] == [ids["slow"]]
    assert warnings["FailedRecords"]["by_scope"] == {"payments": 1}


def record(record_id: str) -> StoredRecord:
    return StoredRecord(
        record_id=record_id,
        status=Status.IN_PROGRESS,
        fence=1,
        attempts=1,
        owner=None,
        lock_token=None,
        lease_expires_at_ms=0,
        created_at_ms=None,
        updated_at_ms=None,
        expires_at_s=None,
        fingerprint=None,
        error=None,
        result_text=None,
        result_sha256=None,
        result_size=None,
    )


def test_tally_bounds_the_work_and_the_sample(handler: ModuleType) -> None:
    records = [record(f"{'a' if n % 2 else 'b'}#{n}") for n in range(30)]
    result = handler.tally(iter(records), limit=25)
    assert (result.count, result.truncated) == (25, True)
    assert len(result.sample) == handler.SAMPLE_SIZE
    assert dict(result.by_scope) == {"a": 12, "b": 13}
    assert handler.tally(iter(records[:3]), limit=25).truncated is False
