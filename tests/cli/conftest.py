"""Fixtures for the operator CLI tests: in-process moto SQS/CloudFormation, a CLI runner and a
PostgreSQL database of a test's own."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner, Result

from exactly_once import IdempotencyStore, observability
from exactly_once_cli import up as up_cli
from exactly_once_cli.app import app
from exactly_once_ops.local_state import STATE_DIR_ENV, StatePaths, UpState
from exactly_once_ops.targets import AwsTarget
from tests.cli.support import REGION, Invoke, InvokeWith, QueuePair, make_pair
from tests.cli.up_support import served

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from local_aws.dynamodb_local import DynamoDBLocal
    from local_aws.postgres_server import PostgresServer


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No real endpoint, profile or credentials can leak into a test."""
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture
def cli() -> Invoke:
    """Run the CLI in-process; stdout and stderr are both in `result.output`."""
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(app, list(args))

    return invoke


@pytest.fixture
def sqs() -> Iterator[SQSClient]:
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


@pytest.fixture
def cloudformation(sqs: SQSClient) -> CloudFormationClient:
    """CloudFormation in the same moto mock as `sqs`."""
    return boto3.client("cloudformation", region_name=REGION)


@pytest.fixture
def orders(sqs: SQSClient) -> QueuePair:
    return make_pair(sqs, "orders-queue")


@pytest.fixture
def payments(sqs: SQSClient) -> QueuePair:
    return make_pair(sqs, "payments-queue", fifo=True)


@pytest.fixture
def sqs_hooks(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[SQSClient], None]], None]:
    """Install hooks on every SQS client the CLI creates (e.g. `inject_failures`)."""

    def install(hook: Callable[[SQSClient], None]) -> None:
        original = AwsTarget.sqs

        def patched(self: AwsTarget) -> SQSClient:
            client = original(self)
            hook(client)
            return client

        monkeypatch.setattr(AwsTarget, "sqs", patched)

    return install


@pytest.fixture
def restored_environment() -> Iterator[None]:
    """`invoke` and `replay` give the handler its function's environment in this process
    (whatever the deployed function sets); undo all of it after each test."""
    before = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(before)


class CurrentStdout:
    """Writes to whatever sys.stdout is now (each CliRunner run swaps it, then closes it)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@pytest.fixture
def layer_logs_to_current_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layer's logger keeps the stream it was created with: the first run's, soon closed."""
    monkeypatch.setattr(observability.logger().registered_handler, "stream", CurrentStdout())


@pytest.fixture
def new_database(postgres_server: PostgresServer) -> Iterator[str]:
    """The DSN of an empty database of the test's own on the session's server (no schema):
    tests that count or list everything in it see only their own rows."""
    import psycopg

    from exactly_once.stores.postgres import connections

    name = f"cli_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield postgres_server.dsn_for(name)
    connections.close_all()  # the pools a command or the test opened on it
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"
CODE_FOLDERS = {
    "orders": "orders",
    "paymentsapi": "payments_api",
    "salescounter": "sales",
    "orderstream": "order_stream",
}
"""This repository's entry points (any case) and their code folders under functions/."""


@pytest.fixture
def invoke(
    cli: Invoke,
    orders: QueuePair,
    fresh_idempotency_table: str,
    ledger_table: str,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
    dynamodb_local: DynamoDBLocal,
) -> InvokeWith:
    """`eonce invoke NAME --event FILE` with the test's tables, scope and DLQ (the orders
    pair's), and this repository's code folder for NAME as --source (how invoke finds it in
    an app's cloud assembly is tests/cli/test_invoke_from_assembly.py)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    settings = {
        "IDEMPOTENCY_TABLE": fresh_idempotency_table,
        "LEDGER_TABLE": ledger_table,
        "SUBSCRIBER_SCOPE": scope,
        "CONSUMER_SCOPE": scope,
        "API_SCOPE": scope,
        "DEAD_LETTER_QUEUE_URL": orders.dlq,
        "SNS_ENVELOPE": "auto",  # as the stack sets it on a queue subscribed to a topic
    }
    options = [arg for name, value in settings.items() for arg in ("--env", f"{name}={value}")]

    def run(name: str, event: str) -> Result:
        source = str(FUNCTIONS / CODE_FOLDERS[name.lower()])
        return cli(
            "invoke", name, "--no-from-stack", "--source", source, "--event", event, *options
        )

    return run


@pytest.fixture
def at_dynamodb_local(monkeypatch: pytest.MonkeyPatch, dynamodb_local: DynamoDBLocal) -> None:
    """The CLI's DynamoDB calls go to the session's DynamoDB Local."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)


@pytest.fixture
def store(ddb: DynamoDBClient, fresh_idempotency_table: str) -> IdempotencyStore:
    """A DynamoDB store on a fresh table (test_locks_postgres has its PostgreSQL one)."""
    return IdempotencyStore(fresh_idempotency_table, client=ddb)


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The state folders `up` started a stack in (nothing starts; no EONCE_STATE_DIR)."""
    monkeypatch.delenv(STATE_DIR_ENV, raising=False)
    roots: list[Path] = []

    def start_background(paths: StatePaths, **kwargs: Any) -> tuple[UpState, None]:
        roots.append(paths.root)
        return served(paths), None

    monkeypatch.setattr(up_cli, "start_background", start_background)
    return roots
