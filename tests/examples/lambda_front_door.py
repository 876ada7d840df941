"""Lambda's Invoke front door for a durable function, as AWS documents it, in front of the
durable SDK's local runner; reached through a real boto3 Lambda client.

No local emulator serves Invoke for durable functions (moto does not, and the SDK's local
runner has no Invoke route), so a botocore `before-send` hook answers the client's real request:
the dispatcher's headers and body are serialized by botocore from the Lambda service model, and
the answers are parsed back by botocore as Lambda's would be. What the hook does with a name is
AWS's documented table (the durable functions idempotency page), not AWS itself:

- a name never seen (or no name at all): a new execution starts, here in the local runner;
- a name seen with the same payload: the existing execution is answered, nothing starts;
- a name seen with another payload: 409 DurableExecutionAlreadyStartedException.

`throttle` names execution names answered with 429 TooManyRequestsException instead.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
from botocore.awsrequest import AWSResponse, HTTPHeaders
from botocore.config import Config

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

Start = Callable[[str | None, bytes], str]  # (name, payload) -> the new execution's ARN


@dataclass(frozen=True)
class Sent:
    """One Invoke request as it left the client."""

    path: str
    invocation_type: str | None
    execution_name: str | None
    payload: bytes


@dataclass
class FrontDoor:
    start: Start
    throttle: set[str] = field(default_factory=set)
    sent: list[Sent] = field(default_factory=list)
    started: list[str] = field(default_factory=list)  # ARNs, in start order
    _names: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        headers = request.headers
        name = _text(headers.get("X-Amz-Durable-Execution-Name"))
        body = request.body if isinstance(request.body, bytes) else bytes(request.body or b"")
        sent = Sent(request.url, _text(headers.get("X-Amz-Invocation-Type")), name, body)
        with self._lock:
            self.sent.append(sent)
            if name is not None and name in self.throttle:
                return _error(request.url, 429, "TooManyRequestsException", "Rate exceeded")
            if name is not None and name in self._names:
                payload, arn = self._names[name]
                if payload != body:
                    return _error(
                        request.url,
                        409,
                        "DurableExecutionAlreadyStartedException",
                        f"execution {name} already started with another payload",
                    )
                return _accepted(request.url, arn)
            arn = self.start(name, body)
            self.started.append(arn)
            if name is not None:
                self._names[name] = (body, arn)
            return _accepted(request.url, arn)

    def client(self) -> LambdaClient:
        """A real Lambda client whose Invoke requests this front door answers (no retries, so
        a throttle reaches the caller at once)."""
        client = boto3.client(
            "lambda",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            endpoint_url="https://lambda.invalid",
            config=Config(retries={"total_max_attempts": 1}),
        )
        # botocore's stubs type handlers as returning None, but before-send handlers may answer.
        client.meta.events.register("before-send.lambda.Invoke", self)  # type: ignore[arg-type]
        return client


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _accepted(url: str, arn: str) -> AWSResponse:
    headers = HTTPHeaders()
    headers["X-Amz-Durable-Execution-Arn"] = arn
    return AWSResponse(url, 202, headers, _Raw(b""))


def _error(url: str, status: int, code: str, message: str) -> AWSResponse:
    """An error as Lambda's REST-JSON protocol sends it: the code in x-amzn-ErrorType, the
    members (Type, Message) in the body."""
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/json"
    headers["x-amzn-ErrorType"] = code
    body = json.dumps({"Type": "User", "Message": message}).encode()
    return AWSResponse(url, status, headers, _Raw(body))


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body

    def read(self, *_: Any, **__: Any) -> bytes:
        return self._body
