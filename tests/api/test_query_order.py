"""The fingerprint and a query's order: `?approver=alice&approver=bob` is not the request
`?approver=bob&approver=alice` (a handler reading the list in order sees another first
approver), so a key reused across the two gets 422. Parameters with different names may still
come in any order: frameworks and clients rebuild query strings from maps."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exactly_once import HttpRequest, RequestContext
from exactly_once.http.fingerprint import request_fingerprint
from exactly_once_ops.sample_api_events import http_api_event, rest_api_event
from tests.api.conftest import PATH, MakeApi


def v2(query: str) -> HttpRequest:
    event = http_api_event({"amount": "5"}, key="k")
    event["rawQueryString"] = query
    return HttpRequest.from_event(event)


def v1(pairs: list[tuple[str, str]]) -> HttpRequest:
    event = rest_api_event({"amount": "5"}, key="k")
    multi: dict[str, list[str]] = {}
    for name, value in pairs:
        multi.setdefault(name, []).append(value)
    event["multiValueQueryStringParameters"] = multi
    event["queryStringParameters"] = {name: values[-1] for name, values in multi.items()}
    return HttpRequest.from_event(event)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("approver=alice&approver=bob", "approver=bob&approver=alice"),
        ("a=1&approver=alice&b=2&approver=bob", "approver=bob&a=1&approver=alice&b=2"),
        ("x=&x=1", "x=1&x="),
    ],
)
def test_repeated_parameters_in_another_order_are_another_request(first: str, second: str) -> None:
    assert request_fingerprint(v2(first)) != request_fingerprint(v2(second))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("amount=5&currency=EUR", "currency=EUR&amount=5"),
        ("a=1&approver=alice&approver=bob", "approver=alice&a=1&approver=bob"),
    ],
)
def test_parameters_with_different_names_may_be_reordered(first: str, second: str) -> None:
    assert request_fingerprint(v2(first)) == request_fingerprint(v2(second))


def test_the_rest_api_lists_repeats_in_order_and_they_count_too() -> None:
    alice_first = v1([("approver", "alice"), ("approver", "bob"), ("amount", "5")])
    bob_first = v1([("amount", "5"), ("approver", "bob"), ("approver", "alice")])
    reordered = v1([("amount", "5"), ("approver", "alice"), ("approver", "bob")])
    assert request_fingerprint(alice_first) != request_fingerprint(bob_first)
    assert request_fingerprint(alice_first) == request_fingerprint(reordered)


def test_through_the_gateway_a_key_reused_with_repeats_reordered_gets_422(
    make_api: MakeApi,
) -> None:
    approvals: list[list[str]] = []

    def approve(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        approvers = [value for name, value in request.query if name == "approver"]
        approvals.append(approvers)
        return {"statusCode": 201, "body": json.dumps({"first_approver": approvers[0]})}

    served = make_api(approve)

    def post(query: str) -> Any:
        return served.client.request("POST", f"{PATH}?{query}", body={"amount": 5}, key="ap-1")

    first = post("approver=alice&approver=bob&amount=5")
    assert first.status == 201
    reordered_names = post("amount=5&approver=alice&approver=bob")
    assert (reordered_names.status, reordered_names.replayed) == (201, True)
    swapped = post("approver=bob&approver=alice&amount=5")
    assert swapped.status == 422, f"answered {swapped.status}: {swapped.body!r}"
    assert swapped.headers["content-type"] == "application/problem+json"
    assert approvals == [["alice", "bob"]]
