"""A repeated Idempotency-Key header: API Gateway joins repeats (payload 2.0 with ",", REST
API's multiValueHeaders, which HttpRequest joins with ", "). The draft makes the field a single
sf-string Item, so a list is answered 400, and never names a new key that would run the
request again."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import HttpRequest, RequestContext, idempotent_api
from exactly_once.http.api import IdempotentApi
from exactly_once.http.keys import InvalidKey, parse_key
from exactly_once_ops.sample_api_events import http_api_event, rest_api_event

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass
class Charge:
    """A payment endpoint on a scope of its own; `runs` has the fence of each execution."""

    handle: IdempotentApi
    runs: list[int]


@pytest.fixture
def charge(ddb: DynamoDBClient, idempotency_table: str) -> Charge:
    runs: list[int] = []

    @idempotent_api(
        table_name=idempotency_table, scope=f"rv-{uuid.uuid4().hex[:8]}", dynamodb_client=ddb
    )
    def handle(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.fence)
        return {"statusCode": 201, "body": json.dumps({"charged": True})}

    return Charge(handle, runs)


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
    repeated: Any, charge: Charge
) -> None:
    assert charge.handle(repeated("pay-1", 1), None)["statusCode"] == 201
    # A proxy or client library that adds the header instead of setting it, on the retry:
    again = charge.handle(repeated("pay-1", 2), None)
    assert len(charge.runs) == 1, f"charged twice; the retry answered {again['statusCode']}"
    assert again["statusCode"] == 400 or again["headers"].get("Idempotent-Replayed") == "true"


@pytest.mark.parametrize("joined", ["k-1,k-2", "k-1, k-2", '"k-1", "k-2"'])
def test_a_list_of_keys_is_not_a_key(joined: str) -> None:
    with pytest.raises(InvalidKey):
        parse_key(joined)


# -- the same header twice, its names differing only in case --------------------------------


def http_two_cases(first: str, second: str) -> dict[str, Any]:
    event = http_api_event({"amount": "5"}, key=None)
    event["headers"] |= {"Idempotency-Key": first, "idempotency-key": second}
    return event


def rest_two_cases(first: str, second: str) -> dict[str, Any]:
    """As a REST API delivers it: each spelling in `headers` and in `multiValueHeaders`."""
    event = rest_api_event({"amount": "5"}, key=first)
    event["headers"]["idempotency-key"] = second
    event["multiValueHeaders"] |= {"Idempotency-Key": [first], "idempotency-key": [second]}
    return event


def rest_two_cases_headers_only(first: str, second: str) -> dict[str, Any]:
    event = rest_two_cases(first, second)
    del event["multiValueHeaders"]
    return event


def rest_two_cases_multi_only(first: str, second: str) -> dict[str, Any]:
    event = rest_two_cases(first, second)
    event["headers"] = {k: v for k, v in event["headers"].items() if k.lower() != "idempotency-key"}
    return event


TWO_CASES = [http_two_cases, rest_two_cases, rest_two_cases_headers_only, rest_two_cases_multi_only]


@pytest.mark.parametrize("two_cases", TWO_CASES)
@pytest.mark.parametrize(("first", "second"), [("k-a", "k-b"), ("k-a", "k-a")])
def test_two_key_headers_differing_only_in_case_get_400_and_nothing_runs(
    two_cases: Any, first: str, second: str, charge: Charge
) -> None:
    """Header names are case-insensitive (RFC 9110): the two are one field sent twice, not a
    key that the last spelling overwrites (which one is "last" is the dict's order)."""
    answer = charge.handle(two_cases(first, second), None)
    assert answer["statusCode"] == 400, f"ran with key {charge.handle.last_result}"
    assert answer["headers"]["content-type"] == "application/problem+json"
    problem = json.loads(answer["body"])
    assert (problem["status"], problem["type"]) == (400, "urn:exactly-once:problem:key-invalid")
    assert charge.runs == []


def test_other_headers_sent_in_two_cases_keep_both_values() -> None:
    event = rest_api_event({}, key="k")
    event["headers"] |= {"X-Tag": "a", "x-tag": "b"}
    event["multiValueHeaders"] |= {"X-Tag": ["a"], "x-tag": ["b"]}
    assert HttpRequest.from_event(event).header("x-tag") == "a, b"
    del event["multiValueHeaders"]
    assert HttpRequest.from_event(event).header("X-TAG") == "a, b"
