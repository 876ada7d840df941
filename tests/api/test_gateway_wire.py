"""The local gateway speaks HTTP as API Gateway does: a HEAD answer has no body (a body would
corrupt the next answer on a keep-alive connection), a chunked request body reaches the handler,
repeated headers are joined with ",", and a malformed Content-Length gets a 400, not silence."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any
from urllib.parse import urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from exactly_once import HttpRequest, RequestContext
from tests.api.conftest import PATH, MakeApi, Served


def connect(endpoint: str) -> http.client.HTTPConnection:
    split = urlsplit(endpoint)
    return http.client.HTTPConnection(split.hostname or "", split.port, timeout=10)


def authorization(endpoint: str, method: str) -> str:
    signed = AWSRequest(method=method, url=endpoint + PATH, data=b"", headers={})
    SigV4Auth(Credentials("AKIAREVIEW", "testing"), "execute-api", "us-east-1").add_auth(signed)
    return str(signed.headers["Authorization"])


def send_raw(
    served: Served, method: str, headers: list[tuple[str, str]], **putrequest: Any
) -> http.client.HTTPResponse:
    """A signed request whose header lines are sent as given, repeats and all (what `request`
    would fold or refuse); no body."""
    conn = connect(served.gateway.endpoint)
    conn.putrequest(method, PATH, **putrequest)
    conn.putheader("Authorization", authorization(served.gateway.endpoint, method))
    for name, value in headers:
        conn.putheader(name, value)
    conn.endheaders()
    return conn.getresponse()


def echo(seen: list[HttpRequest]) -> Any:
    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        seen.append(request)
        return {"statusCode": 201, "body": json.dumps({"bytes": len(request.body)})}

    return handler


def test_a_head_answer_has_no_body_so_the_connection_stays_usable(make_api: MakeApi) -> None:
    """http.client and urllib3 close the connection after any HEAD, which hides this; curl,
    browsers and proxies keep it and read the stray body as the next answer's status line."""
    served = make_api(echo([]))
    split = urlsplit(served.gateway.endpoint)
    with socket.create_connection((split.hostname or "", split.port or 80), timeout=10) as sock:
        sock.sendall(b"HEAD /payments HTTP/1.1\r\nHost: local\r\n\r\n")
        received = b""
        while b"\r\n\r\n" not in received:
            received += sock.recv(65536)
        head, _, rest = received.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 ")
        sock.sendall(b"GET /nowhere HTTP/1.1\r\nHost: local\r\n\r\n")
        while len(rest) < len(b"HTTP/1.1 "):
            rest += sock.recv(65536)
    assert rest.startswith(b"HTTP/1.1 "), f"the next answer starts with {rest[:40]!r}"


def test_a_chunked_request_body_reaches_the_handler(make_api: MakeApi) -> None:
    seen: list[HttpRequest] = []
    served = make_api(echo(seen))
    body = json.dumps({"amount": "12.50"}).encode()
    conn = connect(served.gateway.endpoint)
    conn.request(
        "POST",
        PATH,
        body=iter([body]),
        headers={
            "Authorization": authorization(served.gateway.endpoint, "POST"),
            "Content-Type": "application/json",
            "Idempotency-Key": "chunked-1",
            "Transfer-Encoding": "chunked",
        },
        encode_chunked=True,
    )
    reply = conn.getresponse()
    reply.read()
    assert seen, f"the handler never ran ({reply.status})"
    assert seen[0].body == body, "the handler ran (and its answer was stored) for an empty body"


def test_repeated_headers_are_joined_as_api_gateway_joins_them(make_api: MakeApi) -> None:
    seen: list[HttpRequest] = []
    served = make_api(echo(seen))
    send_raw(served, "GET", [("X-Tag", "a"), ("X-Tag", "b")]).read()
    assert seen[0].header("x-tag") == "a,b"


def test_a_malformed_content_length_gets_an_http_answer(make_api: MakeApi) -> None:
    served = make_api(echo([]))
    reply = send_raw(  # RemoteDisconnected: the handler thread died on int("ten")
        served,
        "POST",
        [("Idempotency-Key", "cl-1"), ("Content-Length", "ten")],
        skip_accept_encoding=True,
    )
    assert reply.status == 400


def test_a_key_sent_twice_in_two_cases_gets_400_over_the_wire(make_api: MakeApi) -> None:
    seen: list[HttpRequest] = []
    served = make_api(echo(seen))
    reply = send_raw(
        served,
        "POST",
        [("Idempotency-Key", "k-a"), ("idempotency-key", "k-b"), ("Content-Length", "0")],
    )
    problem = json.loads(reply.read())
    assert (reply.status, problem["type"]) == (400, "urn:exactly-once:problem:key-invalid")
    assert seen == []
