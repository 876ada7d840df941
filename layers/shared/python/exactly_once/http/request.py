"""Reading an API Gateway or function URL event, once, into a typed `HttpRequest`.

One code path for the three shapes Lambda receives: REST API (payload 1.0: `httpMethod`,
`path`, `multiValueHeaders`), HTTP API payload 2.0 and function URLs (`version` "2.0",
`rawPath`, `requestContext.http`). Reading never raises: a field of the wrong type reads as
absent, and what is missing is answered later with a 400.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl


@dataclass(frozen=True)
class HttpRequest:
    event: Any
    """As delivered: the handler may read anything the typed fields leave out."""
    method: str
    """Upper case; "" when the event names none (not an HTTP event)."""
    path: str
    headers: Mapping[str, str]
    """Names in lower case; repeated headers joined with ", " as payload 2.0 does."""
    query: tuple[tuple[str, str], ...]
    """Every (name, value) pair, in order, repeats kept."""
    body: bytes
    """Decoded from base64 when API Gateway encoded it (binary media)."""
    body_was_base64: bool
    request_id: str
    payload_version: str
    """"1.0" (REST API) or "2.0" (HTTP API, function URL)."""
    derived: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    @classmethod
    def from_event(cls, event: Any) -> HttpRequest:
        fields = event if isinstance(event, dict) else {}
        context = _dict(fields.get("requestContext"))
        version = "2.0" if fields.get("version") == "2.0" else "1.0"
        if version == "2.0":
            method = _text(_dict(context.get("http")).get("method"))
            path = _text(fields.get("rawPath")) or _text(_dict(context.get("http")).get("path"))
            query = tuple(parse_qsl(_text(fields.get("rawQueryString")), keep_blank_values=True))
        else:
            method = _text(fields.get("httpMethod"))
            path = _text(fields.get("path"))
            query = _v1_query(fields)
        return cls(
            event=event,
            method=method.upper(),
            path=path,
            headers=_headers(fields),
            query=query,
            body=_body(fields),
            body_was_base64=fields.get("isBase64Encoded") is True,
            request_id=_text(context.get("requestId")),
            payload_version=version,
        )

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def text(self) -> str:
        """The body as text; bytes that are not UTF-8 become U+FFFD."""
        return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body parsed as JSON; ValueError when it is not JSON (RecursionError included)."""
        try:
            return json.loads(self.body)
        except RecursionError as exc:
            raise ValueError("body is JSON nested too deeply to parse") from exc

    @property
    def authorizer(self) -> dict[str, Any]:
        context = _dict(_dict(self.event).get("requestContext"))
        return _dict(context.get("authorizer"))

    @property
    def identity(self) -> dict[str, Any]:
        """REST API only: `requestContext.identity` (IAM caller, API key id, source IP)."""
        context = _dict(_dict(self.event).get("requestContext"))
        return _dict(context.get("identity"))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _headers(fields: dict[str, Any]) -> dict[str, str]:
    """Lower-case names, each with every value it came with, joined with ", " as payload 2.0
    joins repeats. Names are case-insensitive (RFC 9110): `Idempotency-Key` and
    `idempotency-key` in one event are one field sent twice, never one spelling overwriting
    the other (a key sent twice is then refused, as any repeat is). Payload 1.0 keeps every
    value in `multiValueHeaders` (`headers` has the last), which wins where it has the name."""
    single: dict[str, list[str]] = {}
    for name, value in _dict(fields.get("headers")).items():
        if isinstance(name, str) and isinstance(value, str):
            single.setdefault(name.lower(), []).append(value)
    multi: dict[str, list[str]] = {}
    for name, values in _dict(fields.get("multiValueHeaders")).items():
        if isinstance(name, str) and isinstance(values, list):
            texts = [v for v in values if isinstance(v, str)]
            if texts:
                multi.setdefault(name.lower(), []).extend(texts)
    return {name: ", ".join(values) for name, values in {**single, **multi}.items()}


def _v1_query(fields: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    multi = _dict(fields.get("multiValueQueryStringParameters"))
    single = _dict(fields.get("queryStringParameters"))
    for name, values in (multi or {k: [v] for k, v in single.items()}).items():
        for value in values if isinstance(values, list) else []:
            if isinstance(name, str) and isinstance(value, str):
                pairs.append((name, value))
    return tuple(pairs)


def _body(fields: dict[str, Any]) -> bytes:
    body = fields.get("body")
    if not isinstance(body, str):
        return b""
    if fields.get("isBase64Encoded") is True:
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return body.encode("utf-8", "surrogatepass")  # not base64 after all: as sent
    return body.encode("utf-8", "surrogatepass")
