"""A local HTTP API: requests on a loopback port become API Gateway events for a handler.

Like `sam local start-api`, without Docker: each request is turned into an HTTP API payload
2.0 event (the shape `IdempotentHttpApi` deploys), the route's handler is called in this
process with a Lambda context counting down its timeout, and its proxy response is sent back.

What it emulates of API Gateway, and what not:
- routes are exact `METHOD /path` matches (`{name}` segments become path parameters);
  anything else is 404 `{"message":"Not Found"}`;
- IAM authorization: a request without a SigV4 `Authorization` header gets 403
  `{"message":"Forbidden"}`; with one, its access key id names the caller in
  `requestContext.authorizer.iam`. The signature is NOT verified: this is a local tool;
- bodies are base64-encoded in the event unless their content type is text, as HTTP APIs do;
- a handler that raises, or returns what API Gateway could not send, gives 500
  `{"message":"Internal Server Error"}`;
- no throttling, no payload limits, no integration timeout.
Requests run on their own threads, so concurrent requests really overlap (Lambda would run
them in separate environments; the handlers here share one process).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from exactly_once.http.response import HttpResponse, MalformedResponse
from exactly_once_ops.lambda_context import LocalLambdaContext
from local_aws.lifecycle import Lifecycle

LambdaHandler = Callable[[Any, Any], Any]
ACCOUNT = "123456789012"
_CREDENTIAL = re.compile(r"Credential=([A-Za-z0-9]+)/")
_TEXT_TYPES = re.compile(
    r"^(text/|application/(json|xml|javascript|x-www-form-urlencoded)|.*\+(json|xml))", re.I
)


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # "/payments", "/payments/{id}"
    handler: LambdaHandler
    function_name: str = "local-api"
    timeout_s: float = 29.0

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        """Path parameters when the route takes this request, else None."""
        if method != self.method:
            return None
        pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path))
        found = re.fullmatch(pattern, path)
        return None if found is None else {k: unquote(v) for k, v in found.groupdict().items()}


def iam_caller(authorization: str | None) -> dict[str, Any] | None:
    """`authorizer.iam` for a SigV4 Authorization header (unverified), or None without one."""
    if not authorization or not authorization.startswith("AWS4-HMAC-SHA256"):
        return None
    found = _CREDENTIAL.search(authorization)
    if found is None:
        return None
    access_key = found.group(1)
    return {
        "accessKey": access_key,
        "accountId": ACCOUNT,
        "callerId": access_key,
        "cognitoIdentity": None,
        "principalOrgId": None,
        "userArn": f"arn:aws:iam::{ACCOUNT}:user/{access_key}",
        "userId": access_key,
    }


def to_event(
    method: str,
    target: str,
    headers: Mapping[str, str],
    body: bytes,
    route: Route,
    path_parameters: dict[str, str],
    authorizer: dict[str, Any] | None,
    source_ip: str,
) -> dict[str, Any]:
    """An HTTP API payload 2.0 event, as API Gateway would build it."""
    split = urlsplit(target)
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        lowered[key] = f"{lowered[key]},{value}" if key in lowered else value
    cookies = [c.strip() for c in lowered.pop("cookie", "").split(";") if c.strip()]
    text = bool(_TEXT_TYPES.match(lowered.get("content-type", "")))
    try:
        body_text, encoded = (body.decode("utf-8"), False) if text else ("", True)
    except UnicodeDecodeError:
        body_text, encoded = "", True
    if encoded:
        body_text = base64.b64encode(body).decode("ascii")
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route.route_key,
        "rawPath": split.path,
        "rawQueryString": split.query,
        "headers": lowered,
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "local",
            "domainName": lowered.get("host", "127.0.0.1"),
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": split.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": lowered.get("user-agent", ""),
            },
            "requestId": uuid.uuid4().hex[:16],
            "routeKey": route.route_key,
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "isBase64Encoded": encoded,
    }
    if body:
        event["body"] = body_text
    if cookies:
        event["cookies"] = cookies
    if path_parameters:
        event["pathParameters"] = path_parameters
    if split.query:
        params: dict[str, str] = {}
        for pair in split.query.split("&"):
            name, _, value = pair.partition("=")
            params[unquote(name)] = (
                f"{params[unquote(name)]},{unquote(value)}"
                if unquote(name) in params
                else unquote(value)
            )
        event["queryStringParameters"] = params
    if authorizer is not None:
        event["requestContext"]["authorizer"] = {"iam": authorizer}
    return event


class _Server(ThreadingHTTPServer):
    # The stdlib's listen backlog is 5: a burst of concurrent clients (50 in a test, 16 in
    # `make run`) would overflow it and see connections reset.
    request_queue_size = 256
    daemon_threads = True


class LocalHttpApi(Lifecycle):
    """`with LocalHttpApi(routes) as api:` serves on `api.endpoint` until the block ends."""

    def __init__(self, routes: list[Route], *, port: int = 0, iam_auth: bool = True) -> None:
        self.routes = routes
        self.iam_auth = iam_auth
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                body = self._body()
                if body is None:
                    status, headers, payload = _message(HTTPStatus.BAD_REQUEST, "Bad Request")
                    self.close_connection = True
                else:
                    status, headers, payload = gateway.invoke(
                        self.command,
                        self.path,
                        _joined(self.headers.items()),
                        body,
                        self.client_address[0],
                    )
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":  # a HEAD answer has headers only
                    self.wfile.write(payload)

            def _body(self) -> bytes | None:
                """The request body: by Content-Length, or chunked; None when unreadable."""
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    chunks: list[bytes] = []
                    while True:
                        size_line = self.rfile.readline(1024).split(b";")[0].strip()
                        try:
                            size = int(size_line, 16)
                        except ValueError:
                            return None
                        if size == 0:
                            while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline(1024)  # the CRLF after each chunk
                raw = self.headers.get("Content-Length") or "0"
                if not raw.isdigit():
                    return None
                length = int(raw)
                return self.rfile.read(length) if length else b""

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return  # the handlers' JSON logs say what happened

        server = _Server(("127.0.0.1", self._port), Handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="local-http-api")
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def invoke(
        self, method: str, target: str, headers: dict[str, str], body: bytes, source_ip: str
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """One request through the route's handler: (status, headers, body bytes)."""
        path = urlsplit(target).path
        for route in self.routes:
            parameters = route.match(method, path)
            if parameters is not None:
                break
        else:
            return _message(HTTPStatus.NOT_FOUND, "Not Found")
        authorizer = None
        if self.iam_auth:
            authorization = next(
                (v for k, v in headers.items() if k.lower() == "authorization"), None
            )
            authorizer = iam_caller(authorization)
            if authorizer is None:
                return _message(HTTPStatus.FORBIDDEN, "Forbidden")
        event = to_event(method, target, headers, body, route, parameters, authorizer, source_ip)
        context = LocalLambdaContext(route.function_name, timeout_s=route.timeout_s)
        try:
            response = HttpResponse.from_handler(route.handler(event, context))
        except (Exception, MalformedResponse):
            return _message(HTTPStatus.INTERNAL_SERVER_ERROR, "Internal Server Error")
        return _wire(response)


def _joined(headers: Any) -> dict[str, str]:
    """Repeated request headers joined with "," as API Gateway joins them (payload 2.0)."""
    joined: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    return joined


def _wire(response: HttpResponse) -> tuple[int, list[tuple[str, str]], bytes]:
    headers = list(response.headers.items())
    for name, values in response.multi_value_headers.items():
        headers += [(name, value) for value in values]
    headers += [("Set-Cookie", cookie) for cookie in response.cookies]
    if response.is_base64:
        payload = base64.b64decode(response.body)
    else:
        payload = response.body.encode("utf-8", "surrogatepass")
    if not any(name.lower() == "content-type" for name, _ in headers):
        headers.append(("Content-Type", "application/json"))
    return response.status, headers, payload


def _message(status: HTTPStatus, text: str) -> tuple[int, list[tuple[str, str]], bytes]:
    body = json.dumps({"message": text}).encode()
    return int(status), [("Content-Type", "application/json")], body
