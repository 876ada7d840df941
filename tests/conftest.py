"""Session-wide servers: DynamoDB Local and PostgreSQL start once on free loopback ports and stop
at the end."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
import psycopg
import pytest
from botocore.config import Config
from hypothesis import HealthCheck, settings

from exactly_once import clients
from exactly_once.stores.dynamodb.store import IdempotencyStore
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.postgres_server import PostgresServer
from local_aws.tables import create_idempotency_table, create_ledger_table
from tests.layer_bytecode import report, stand_in_environment
from tests.packaging.dists import Dists, build_dists

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

# Never reach real AWS from tests, whatever the developer's shell has configured.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }
)
os.environ.pop("AWS_PROFILE", None)

# Hypothesis times each example by the wall clock (a 200 ms deadline) and its data generation
# (the too_slow health check). On CI's loaded 2-core machine one stall of a few hundred ms then
# fails a correct property test ("Unreliable test timings"). The properties are about values,
# never speed: max_examples bounds their size, pytest-timeout a hang.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

# Every synthesis builds the layer: without a target's Python here, the running one compiles it
# (tests/layer_bytecode.py), and the header says so.
stand_in_environment()


def pytest_report_header() -> list[str]:
    return report()


class FakeClock:
    """Epoch seconds under the test's control, so leases and TTLs expire on demand."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    server = DynamoDBLocal().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session; fsync is off since its data is thrown away."""
    server = PostgresServer(fsync=False).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_dsn(postgres_server: PostgresServer) -> Iterator[str]:
    """A database `eonce_test` with the shipped migrations applied, shared by the session."""
    # Imported here so that collecting the tests never depends on the PostgreSQL package.
    from exactly_once.stores.postgres.migrations import migrate

    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute("CREATE DATABASE eonce_test")
    dsn = postgres_server.dsn_for("eonce_test")
    migrate(dsn)
    yield dsn
    from exactly_once.stores.postgres import connections

    connections.close_all()  # the store's pools, before the server stops


def make_ddb_client(endpoint: str, max_attempts: int = 3) -> DynamoDBClient:
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=Config(
            retries={"mode": "standard", "total_max_attempts": max_attempts},
            max_pool_connections=64,
        ),
    )


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto for SQS and SNS (never DynamoDB: its conditional writes are not atomic)."""
    from moto.server import ThreadedMotoServer

    from local_aws.ports import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="session")
def sqs(moto_endpoint: str) -> SQSClient:
    return boto3.client("sqs", endpoint_url=moto_endpoint, region_name="us-east-1")


@pytest.fixture(scope="session")
def ddb(dynamodb_local: DynamoDBLocal) -> DynamoDBClient:
    return make_ddb_client(dynamodb_local.endpoint)


@pytest.fixture(scope="session")
def idempotency_table(ddb: DynamoDBClient) -> str:
    """One table for the session; tests isolate themselves with a unique scope."""
    name = "idempotency-shared"
    create_idempotency_table(ddb, name)
    return name


@pytest.fixture
def store(ddb: DynamoDBClient, idempotency_table: str) -> IdempotencyStore:
    """The store on the session's idempotency table (tests that need a fresh one make it)."""
    return IdempotencyStore(idempotency_table, client=ddb)


@pytest.fixture
def fresh_idempotency_table(ddb: DynamoDBClient) -> Iterator[str]:
    """A table of the test's own, for tests that list or count everything in it."""
    name = f"idem-{uuid.uuid4().hex[:12]}"
    create_idempotency_table(ddb, name)
    yield name
    ddb.delete_table(TableName=name)


@pytest.fixture
def ledger_table(ddb: DynamoDBClient) -> Iterator[str]:
    name = f"ledger-{uuid.uuid4().hex[:12]}"
    create_ledger_table(ddb, name)
    yield name
    ddb.delete_table(TableName=name)


@pytest.fixture
def scope() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(autouse=True)
def _fresh_layer_clients() -> Iterator[None]:
    """The layer caches boto3 clients; tests that point it elsewhere must not leak them."""
    clients.reset()
    yield
    clients.reset()


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """The wheel and sdist as `make dist` builds them (the wheel from the sdist), once per
    session: what a user installs, for the packaging tests and the tests that run the product
    outside the repository."""
    return build_dists(tmp_path_factory.mktemp("dist"))
