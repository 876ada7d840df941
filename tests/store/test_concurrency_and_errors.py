"""Races on acquire, and DynamoDB errors that must surface rather than be swallowed."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pytest
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.exceptions import ClientError

from exactly_once import AcquireStatus, IdempotencyStore
from tests.conftest import make_ddb_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal

THREADS = 32
KEYS = 100


def test_32_threads_racing_acquire_have_exactly_one_winner_per_key(
    ddb: DynamoDBClient, idempotency_table: str, scope: str
) -> None:
    store = IdempotencyStore(idempotency_table, client=ddb)
    winners: dict[str, list[int]] = {}

    def race(key: str, barrier: threading.Barrier) -> AcquireStatus:
        barrier.wait()
        return store.acquire(scope, key, lease_ms=60_000, owner="racer").status

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        for n in range(KEYS):
            key = f"key-{n}"
            barrier = threading.Barrier(THREADS)
            futures = [pool.submit(race, key, barrier) for _ in range(THREADS)]
            outcomes = [f.result() for f in futures]
            winners[key] = [i for i, s in enumerate(outcomes) if s is AcquireStatus.ACQUIRED]
            assert outcomes.count(AcquireStatus.IN_PROGRESS) == THREADS - 1, key

    assert all(len(w) == 1 for w in winners.values())
    assert len(winners) == KEYS


def _throttle_every_request(client: DynamoDBClient, calls: list[str]) -> None:
    """Answer every request with DynamoDB's throttling error, before it leaves the process."""

    def respond(request: Any, **_: Any) -> AWSResponse:
        calls.append(request.url)
        body = json.dumps(
            {
                "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
                "message": "The level of configured provisioned throughput was exceeded",
            }
        ).encode()
        headers = HTTPHeaders()
        headers["Content-Type"] = "application/x-amz-json-1.0"
        return AWSResponse(request.url, 400, headers, _Raw(body))

    # botocore's stubs type handlers as returning None, but before-send handlers may answer.
    for operation in ("UpdateItem", "BatchExecuteStatement"):  # one key's call, a batch's
        client.meta.events.register(f"before-send.dynamodb.{operation}", respond)  # type: ignore[arg-type]


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Any:
        yield self._body

    def read(self, *_: Any, **__: Any) -> bytes:
        return self._body


def test_throttling_is_retried_then_surfaces(
    dynamodb_local: DynamoDBLocal, idempotency_table: str, scope: str, ddb: DynamoDBClient
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=3)
    calls: list[str] = []
    _throttle_every_request(client, calls)
    store = IdempotencyStore(idempotency_table, client=client)

    with pytest.raises(ClientError) as raised:
        store.acquire(scope, "k", lease_ms=1000, owner="x")

    assert raised.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert len(calls) == 3  # botocore standard mode retried, bounded by max_attempts
    # nothing was written, and a healthy client can acquire the key
    healthy = IdempotencyStore(idempotency_table, client=ddb)
    assert healthy.acquire(scope, "k", lease_ms=1000, owner="x").acquired


def test_lazy_client_honours_the_endpoint_environment(
    dynamodb_local: DynamoDBLocal,
    idempotency_table: str,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    store = IdempotencyStore(idempotency_table)  # no client: created on first use
    assert store._client is None
    assert store.acquire(scope, "k", lease_ms=1000, owner="x").acquired
    assert store.client.meta.endpoint_url == dynamodb_local.endpoint
