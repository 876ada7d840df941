"""A repeated Idempotency-Key header: API Gateway joins repeats (payload 2.0 with ",", REST
API's multiValueHeaders, which HttpRequest joins with ", "). The draft makes the field a single
sf-string Item, so a list is answered 400, and never names a new key that would run the
request again."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import HttpRequest, RequestContext, idempotent_api
from exactly_once.http_keys import InvalidKey, parse_key
from exactly_once_ops.sample_api_events import http_api_event, rest_api_event

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def repeated_http(key: str, times: int) -> dict[str, Any]:
    event = http_api_event({"amount": "5"}, key=key)
    event["headers"]["idempotency-key"] = ",".join([key] * times)  # how API Gateway joins them
    return event


def repeated_rest(key: str, times: int) -> dict[str, Any]:
    event = rest_api_event({"amount": "5"}, key=key)
    event["multiValueHeaders"]["Idempotency-Key"] = [key] * times
    return event


@pytest.mark.parametrize("repeated", [repeated_http, repeated_rest])
def test_the_same_key_sent_twice_does_not_run_the_request_again(
    repeated: Any, ddb: DynamoDBClient, idempotency_table: str
) -> None:
    runs: list[int] = []

    @idempotent_api(
        table_name=idempotency_table, scope=f"rv-{uuid.uuid4().hex[:8]}", dynamodb_client=ddb
    )
    def handle(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.fence)
        return {"statusCode": 201, "body": json.dumps({"charged": True})}

    assert handle(repeated("pay-1", 1), None)["statusCode"] == 201
    # A proxy or client library that adds the header instead of setting it, on the retry:
    again = handle(repeated("pay-1", 2), None)
    assert len(runs) == 1, f"charged twice; the retry answered {again['statusCode']}"
    assert again["statusCode"] == 400 or again["headers"].get("Idempotent-Replayed") == "true"


@pytest.mark.parametrize("joined", ["k-1,k-2", "k-1, k-2", '"k-1", "k-2"'])
def test_a_list_of_keys_is_not_a_key(joined: str) -> None:
    with pytest.raises(InvalidKey):
        parse_key(joined)
