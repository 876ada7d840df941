"""A small HTTP client for the idempotent API: SigV4-signed for IAM-authorized routes, with
an Idempotency-Key, over urllib3 (botocore's own HTTP client, so it is always installed).

The same client talks to the local gateway (which reads the signature's access key id as the
caller) and to API Gateway in an account (which verifies the signature).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import urllib3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

_JSON = {"content-type": "application/json"}
_POOL = urllib3.PoolManager(maxsize=64, retries=False)  # retrying is the caller's decision


@dataclass(frozen=True)
class ApiReply:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def replayed(self) -> bool:
        return self.headers.get("idempotent-replayed") == "true"


@dataclass(frozen=True)
class ApiClient:
    endpoint: str
    credentials: Credentials | None = field(
        default_factory=lambda: Credentials("testing", "testing")
    )
    region: str = "us-east-1"
    timeout_s: float = 35.0  # API Gateway gives up at 30 s

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | str | Any = None,
        key: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ApiReply:
        """`body`: bytes as they are, str as UTF-8, anything else as JSON."""
        if body is None:
            data = b""
        elif isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode("utf-8", "surrogatepass")
        else:
            data = json.dumps(body).encode("utf-8")
        given = dict(headers or {})
        sent = {} if any(k.lower() == "content-type" for k in given) else _JSON
        sent = {**sent, **given}
        if key is not None:
            sent["Idempotency-Key"] = key
        url = self.endpoint.rstrip("/") + path
        if self.credentials is not None:
            signed = AWSRequest(method=method, url=url, data=data, headers=sent)
            SigV4Auth(self.credentials, "execute-api", self.region).add_auth(signed)
            sent = dict(signed.headers.items())
        reply = _POOL.request(
            method, url, body=data, headers=sent, timeout=self.timeout_s, redirect=False
        )
        return ApiReply(reply.status, {k.lower(): v for k, v in reply.headers.items()}, reply.data)

    def as_caller(self, access_key: str) -> ApiClient:
        """The same client signing as someone else (another caller, another key space)."""
        return replace(self, credentials=Credentials(access_key, "testing"))
