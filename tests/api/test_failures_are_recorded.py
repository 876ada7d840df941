"""The promise "5xx or an exception: kept FAILED, the next try runs again" holds when the
FAILED write meets a throttle burst (it is retried like completion) and for errors after the
handler returned (they are recorded like the handler's own)."""

from __future__ import annotations

import datetime
import json
import random
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import HttpRequest, HttpResponse, RequestContext, idempotent_api
from exactly_once_ops.sample_api_events import http_api_event
from fault_injection.throttling import install_throttling
from tests.conftest import make_ddb_client

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal


class Burst(random.Random):
    """Throttles the next `remaining` requests, then none."""

    remaining = 0

    def random(self) -> float:
        if self.remaining > 0:
            self.remaining -= 1
            return 0.0
        return 1.0


def test_a_5xx_whose_failed_write_is_throttled_once_still_lets_the_retry_run(
    dynamodb_local: DynamoDBLocal, idempotency_table: str
) -> None:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=2)
    burst = Burst()
    install_throttling(client, 1.0, burst)
    runs: list[int] = []

    @idempotent_api(
        table_name=idempotency_table, scope=f"rv-{uuid.uuid4().hex[:8]}", dynamodb_client=client
    )
    def handle(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            burst.remaining = 2  # one `fail` call's worth: botocore's two attempts
            return {"statusCode": 503, "body": "upstream busy"}
        return {"statusCode": 201, "body": json.dumps({"attempt": ctx.attempt})}

    first = handle(http_api_event({"amount": "1"}, key="f-1"), None)
    assert first["statusCode"] == 503
    assert burst.remaining == 0  # the throttle is over; DynamoDB answers normally again
    second = handle(http_api_event({"amount": "1"}, key="f-1"), None)
    assert second["statusCode"] != 409, "locked out: " + second["body"]
    assert second["statusCode"] == 201
    assert len(runs) == 2


def test_an_error_after_the_handler_returned_leaves_the_key_retryable(
    ddb: DynamoDBClient, idempotency_table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever fails between the handler's return and completion (here, measuring the
    response for the cap) is a recorded, retryable failure, not a key locked for the lease."""
    from exactly_once.http import locked_run
    from exactly_once.http import response as http_response

    runs: list[int] = []
    measured = http_response.encoded_size
    calls: list[int] = []

    def breaks_once(stored: dict[str, Any]) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("measuring failed")
        return measured(stored)

    monkeypatch.setattr(locked_run, "encoded_size", breaks_once)

    @idempotent_api(
        table_name=idempotency_table, scope=f"rv-{uuid.uuid4().hex[:8]}", dynamodb_client=ddb
    )
    def handle(request: HttpRequest, ctx: RequestContext) -> HttpResponse:
        runs.append(ctx.attempt)
        at = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        return HttpResponse(201, {"x-created-at": at})  # type: ignore[dict-item]

    first = handle(http_api_event({"amount": "1"}, key="e-1"), None)
    assert first["statusCode"] == 500  # "Retrying with the same Idempotency-Key is safe"
    second = handle(http_api_event({"amount": "1"}, key="e-1"), None)
    assert second["statusCode"] == 201, "locked out for the lease: " + second["body"]
    # An HttpResponse is checked like the dict it stands for: header values become text.
    assert second["headers"]["x-created-at"] == "2026-01-01 00:00:00+00:00"
    assert len(runs) == 2
