"""Responses: what a handler returned, in the form the store keeps and a replay gives back.

A stored response is replayed byte for byte: the same status, the same (chosen) headers and
the same body text, with `isBase64Encoded` as the handler set it, so binary bodies come back as
API Gateway encoded them. Problem responses follow RFC 9457 (`application/problem+json`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from exactly_once.stores import codec

REPLAYED_HEADER = "Idempotent-Replayed"
PROBLEM_TYPE = "urn:exactly-once:problem:"  # + a name docs/http.md's answer table lists
PROBLEM_JSON = "application/problem+json"


# "Not now", not "no": Request Timeout, Too Early, Too Many Requests (and 503 among the 5xx).
RETRY_LATER_STATUSES = frozenset({408, 425, 429})


def is_final(status: int) -> bool:
    """Whether a handler's answer is the key's final one, stored and replayed. Stripe's rule
    (2xx and 4xx final, 5xx not), except the 4xx that ask the client to come back later: stored,
    they would answer every retry with the refusal and the request could never run."""
    return status < 500 and status not in RETRY_LATER_STATUSES


class MalformedResponse(ValueError):
    """The handler returned something API Gateway could not send (it would answer 502)."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    is_base64: bool = False
    multi_value_headers: dict[str, list[str]] = field(default_factory=dict)  # REST API only
    cookies: list[str] = field(default_factory=list)  # HTTP API and function URLs

    @classmethod
    def from_handler(cls, value: Any) -> HttpResponse:
        """A handler's return value, read as API Gateway reads it.

        A dict with `statusCode` is a proxy response. Anything else is payload 2.0's shortcut
        (status 200, the value as a JSON body), which this applies to every event shape.
        """
        if isinstance(value, HttpResponse):  # checked like the dict it stands for
            value = value.to_lambda()
        if not (isinstance(value, dict) and "statusCode" in value):
            try:
                body = json.dumps(value, allow_nan=False)  # NaN is not JSON
            except (TypeError, ValueError, RecursionError) as exc:
                raise MalformedResponse(f"the return value is not JSON: {exc}") from exc
            return cls(200, {"content-type": "application/json"}, body)
        given: Any = value.get("statusCode")
        try:
            status = int(given)  # API Gateway accepts "201" as well as 201
        except (TypeError, ValueError, OverflowError):
            raise MalformedResponse(f"statusCode is not a number: {given!r}") from None
        cookies: Any = value.get("cookies") or []
        if not isinstance(cookies, list) or not all(isinstance(c, str) for c in cookies):
            raise MalformedResponse("cookies must be a list of strings")
        if not 100 <= status <= 599:
            raise MalformedResponse(f"statusCode {status} is not an HTTP status")
        text: Any = value.get("body")
        if text is not None and not isinstance(text, str):
            raise MalformedResponse(f"body must be a string, got {type(text).__name__}")
        return cls(
            status=status,
            headers={str(k): _header_value(v) for k, v in _dict(value.get("headers")).items()},
            body=text or "",
            is_base64=value.get("isBase64Encoded") is True,
            multi_value_headers={
                str(k): [_header_value(x) for x in v]
                for k, v in _dict(value.get("multiValueHeaders")).items()
                if isinstance(v, list)
            },
            cookies=list(cookies),
        )

    def to_lambda(self) -> dict[str, Any]:
        """The proxy response Lambda hands back to API Gateway."""
        out: dict[str, Any] = {
            "statusCode": self.status,
            "headers": dict(self.headers),
            "body": self.body,
            "isBase64Encoded": self.is_base64,
        }
        if self.multi_value_headers:
            out["multiValueHeaders"] = {k: list(v) for k, v in self.multi_value_headers.items()}
        if self.cookies:
            out["cookies"] = list(self.cookies)
        return out

    def with_header(self, name: str, value: str) -> HttpResponse:
        headers = {k: v for k, v in self.headers.items() if k.lower() != name.lower()}
        return replace(self, headers={**headers, name: value})

    def stored(self, keep: tuple[str, ...] | None) -> dict[str, Any]:
        """What the record keeps; `keep` lists the header names (lower case) to replay."""

        def chosen(name: str) -> bool:
            return keep is None or name.lower() in keep

        return {
            "status": self.status,
            "headers": {k: v for k, v in self.headers.items() if chosen(k)},
            "multiValueHeaders": {k: v for k, v in self.multi_value_headers.items() if chosen(k)},
            "cookies": self.cookies if chosen("set-cookie") else [],
            "body": self.body,
            "isBase64Encoded": self.is_base64,
        }

    def summary(self, keep: tuple[str, ...] | None, cap_bytes: int) -> dict[str, Any]:
        """What the record keeps when the whole response is over the cap: the status, the
        chosen headers while they fit, and the body's size and digest."""
        body = self.body.encode("utf-8", "surrogatepass")
        summary = {
            "status": self.status,
            "headers": self.stored(keep)["headers"],
            "omitted": {"bytes": len(body), "sha256": codec.sha256_hex(self.body)},
        }
        if encoded_size(summary) > cap_bytes:
            summary["headers"] = {}
        return summary


def encoded_size(stored: dict[str, Any]) -> int:
    """Bytes the store would write for it: how it is measured against the cap."""
    return len(codec.dumps(stored).encode("utf-8"))


def replay(stored: Any, cap_bytes: int) -> HttpResponse:
    """The stored response, marked as a replay. A summary (the body was over the cap) or an
    unreadable record gives the problem `response-not-stored`, under the original status."""
    if isinstance(stored, dict) and "body" in stored:
        try:
            response = HttpResponse.from_handler({**stored, "statusCode": stored.get("status")})
        except MalformedResponse:
            response = None
        if response is not None:
            return response.with_header(REPLAYED_HEADER, "true")
    known = stored if isinstance(stored, dict) else {}
    original = known.get("status")
    status = original if isinstance(original, int) and 100 <= original <= 599 else 200
    omitted = _dict(known.get("omitted"))
    detail = (
        f"The first request with this key completed with status {status}, but its "
        f"{omitted.get('bytes', 'unknown')}-byte body was over the {cap_bytes}-byte storage cap, "
        "so it cannot be replayed. The request has taken effect: do not repeat it with a new "
        "key; read the resource it created instead."
    )
    problem_ = problem(
        status,
        "response-not-stored",
        "The response to this request was not stored",
        detail,
        original_body_bytes=omitted.get("bytes"),
        original_body_sha256=omitted.get("sha256"),
    )
    headers = {k: v for k, v in _dict(known.get("headers")).items() if isinstance(v, str)}
    for name in list(headers):
        if name.lower() in ("content-type", "content-length", "content-encoding"):
            del headers[name]
    return replace(problem_, headers={**headers, **problem_.headers}).with_header(
        REPLAYED_HEADER, "true"
    )


def problem(
    status: int,
    name: str,
    title: str,
    detail: str,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> HttpResponse:
    """An RFC 9457 problem response."""
    body = {"type": PROBLEM_TYPE + name, "title": title, "status": status, "detail": detail}
    body.update({k: v for k, v in extensions.items() if v is not None})
    return HttpResponse(
        status,
        {"content-type": PROBLEM_JSON, **(headers or {})},
        json.dumps(body, ensure_ascii=True),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _header_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
