"""One code path for the three event shapes (REST API 1.0, HTTP API 2.0, function URL), read
into one HttpRequest: the same request in any shape is the same request."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from exactly_once import HttpRequest
from exactly_once.http.caller import authorized_caller
from exactly_once.http.fingerprint import request_fingerprint
from exactly_once.http.keys import InvalidKey, parse_key, scoped_key
from exactly_once.http.response import HttpResponse, MalformedResponse
from exactly_once_ops.sample_api_events import (
    CALLER_ARN,
    SAMPLE_KEY,
    api_sample_events,
    function_url_event,
    http_api_event,
    rest_api_event,
)
from exactly_once_ops.sample_events import render
from tests.cli.test_events import EVENTS

SHAPES = {"http": http_api_event, "rest": rest_api_event, "url": function_url_event}


@pytest.mark.parametrize("name", sorted(api_sample_events()))
def test_committed_api_samples_are_up_to_date(name: str) -> None:
    text = (EVENTS / name).read_text(encoding="utf-8")
    assert text == render(api_sample_events()[name]), "regenerate: eonce event-samples"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_reads_the_same_request(shape: str) -> None:
    event = SHAPES[shape]({"amount": "1"}, key=SAMPLE_KEY)
    request = HttpRequest.from_event(event)
    assert (request.method, request.path) == ("POST", "/payments")
    assert request.header("IDEMPOTENCY-KEY") == SAMPLE_KEY
    assert request.json() == {"amount": "1"}
    assert authorized_caller(request) == f"iam:{CALLER_ARN}"
    reference = HttpRequest.from_event(http_api_event({"amount": "1"}, key=SAMPLE_KEY))
    assert request_fingerprint(request) == request_fingerprint(reference)


def test_reading_never_raises_on_malformed_events() -> None:
    malformed: list[Any] = [None, [], "x", {"httpMethod": 5, "headers": ["a"], "body": {"x": 1}}]
    for event in malformed:
        request = HttpRequest.from_event(event)
        assert request.method == ""
        assert request.body == b""
    broken = {"httpMethod": "POST", "isBase64Encoded": True, "body": "not base64!"}
    assert HttpRequest.from_event(broken).body == b"not base64!"


def test_repeated_headers_and_query_parameters_are_kept() -> None:
    event = rest_api_event({}, key="k")
    event["multiValueHeaders"]["X-Tag"] = ["a", "b"]
    event["multiValueQueryStringParameters"] = {"q": ["1", "2"]}
    request = HttpRequest.from_event(event)
    assert request.header("x-tag") == "a, b"
    assert request.query == (("q", "1"), ("q", "2"))
    # A repeated name's values in another order are another request (test_query_order.py).
    other = {**event, "multiValueQueryStringParameters": {"q": ["2", "1"]}}
    assert request_fingerprint(HttpRequest.from_event(other)) != request_fingerprint(request)
    changed = {**event, "multiValueQueryStringParameters": {"q": ["1", "3"]}}
    assert request_fingerprint(HttpRequest.from_event(changed)) != request_fingerprint(request)


def test_binary_bodies_are_decoded_from_base64() -> None:
    event = http_api_event({}, key="k")
    event["body"], event["isBase64Encoded"] = base64.b64encode(b"\x00\xff").decode(), True
    assert HttpRequest.from_event(event).body == b"\x00\xff"


@pytest.mark.parametrize(
    ("authorizer", "identity", "expected"),
    [
        ({"jwt": {"claims": {"sub": "u-1", "iss": "https://idp"}}}, {}, "jwt:https://idp|u-1"),
        ({"claims": {"sub": "u-2"}}, {}, "jwt:|u-2"),
        ({"principalId": "p-1"}, {}, "authorizer:p-1"),
        ({"lambda": {"sub": "p-2"}}, {}, "authorizer:p-2"),
        ({}, {"apiKeyId": "key-1"}, "api-key:key-1"),
        ({}, {"userArn": "arn:aws:iam::1:role/r"}, "iam:arn:aws:iam::1:role/r"),
        ({"jwt": {"claims": {"sub": 7}}}, {"sourceIp": "1.2.3.4"}, None),  # an IP is no caller
    ],
)
def test_the_caller_comes_from_what_the_authorizer_proved(
    authorizer: dict[str, Any], identity: dict[str, Any], expected: str | None
) -> None:
    event = rest_api_event({}, key="k")
    event["requestContext"]["identity"] = identity
    event["requestContext"]["authorizer"] = authorizer
    assert authorized_caller(HttpRequest.from_event(event)) == expected


def test_keys_are_parsed_as_the_draft_says_and_scoped_without_collisions() -> None:
    assert parse_key('"a\\"b"') == 'a"b'
    assert parse_key(" plain ") == "plain"
    for bad in ("", '""', "x" * 256, "é", "a\x7fb"):
        with pytest.raises(InvalidKey):
            parse_key(bad)
    assert scoped_key("a|b", "c") != scoped_key("a", "b|c")
    assert scoped_key("a%7Cb", "c") != scoped_key("a|b", "c")
    assert scoped_key("x" * 2000, "k").startswith("sha256:")
    assert scoped_key("\ud83d", "k").startswith("sha256:")  # not UTF-8: hashed, never refused


@pytest.mark.parametrize(
    "value",
    [
        {"statusCode": "abc"},
        {"statusCode": 700},
        {"statusCode": 200, "body": {"not": "a string"}},
        {1, 2},
    ],
)
def test_what_api_gateway_could_not_send_is_a_malformed_response(value: Any) -> None:
    with pytest.raises(MalformedResponse):
        HttpResponse.from_handler(value)


def test_a_plain_value_is_payload_2_0s_shortcut() -> None:
    response = HttpResponse.from_handler({"ok": True})
    assert (response.status, response.body) == (200, '{"ok": true}')
    assert response.headers == {"content-type": "application/json"}
