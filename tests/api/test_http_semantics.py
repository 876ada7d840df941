"""The Idempotency-Key semantics through a real HTTP client against the local gateway:
replays, conflicts, reuse, bad keys, callers, server errors, binary bodies and the size cap."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from exactly_once import HttpRequest, RequestContext
from exactly_once.ledger import record_effect
from tests.api.conftest import MakeApi
from tests.waiting import BOUND_S, wait_until

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def created(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "statusCode": 201,
        "headers": {"content-type": "application/json", "location": "/payments/p-1"},
        "body": json.dumps(body),
    }


def counted(runs: list[int], answer: Callable[[], Any]) -> Callable[..., Any]:
    """A handler that notes each run's fence in `runs`, then answers."""

    def handler(request: HttpRequest, ctx: RequestContext) -> Any:
        runs.append(ctx.fence)
        return answer()

    return handler


def problem_type(reply: Any) -> str:
    assert reply.headers["content-type"] == "application/problem+json"
    document = reply.json()
    assert document["status"] == reply.status
    return str(document["type"]).rsplit(":", 1)[-1]


def ledger_entries(ddb: DynamoDBClient, table: str) -> list[dict[str, Any]]:
    return list(ddb.scan(TableName=table, ConsistentRead=True)["Items"])


def test_fifty_concurrent_requests_with_one_key_run_the_handler_once(
    make_api: MakeApi, ddb: DynamoDBClient, ledger_table: str
) -> None:
    runs: list[int] = []
    release = threading.Event()

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.fence)
        release.wait(timeout=BOUND_S)  # every other request arrives while this one holds the key
        record_effect(ctx, {"amount": request.json()["amount"]}, table=ledger_table)
        return created({"amount": request.json()["amount"], "fence": ctx.fence})

    served = make_api(handler)
    body = {"accountId": "a-1", "amount": "12.50"}
    with ThreadPoolExecutor(max_workers=50) as pool:
        first = pool.submit(served.post, body, "k-50")
        wait_until(lambda: runs, lambda: "the first request never reached the handler")
        others = [pool.submit(served.post, body, "k-50") for _ in range(49)]
        conflicts = [f.result() for f in others]
        release.set()
        winner = first.result()
    assert len(runs) == 1
    assert winner.status == 201
    assert not winner.replayed
    for reply in conflicts:
        assert reply.status == 409
        assert problem_type(reply) == "request-in-progress"
        assert int(reply.headers["retry-after"]) >= 1
    after = [served.post(body, "k-50") for _ in range(3)]
    assert all(r.status == 201 and r.body == winner.body and r.replayed for r in after)
    assert len(runs) == 1
    assert len(ledger_entries(ddb, ledger_table)) == 1


def test_a_replay_is_the_first_response_byte_for_byte_plus_the_replay_header(
    make_api: MakeApi,
) -> None:
    runs: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(1)
        response = created({"id": ctx.request_id, "note": "é ✓ \u2028"})
        response["headers"]["x-request"] = ctx.request_id
        response["cookies"] = ["session=abc; Path=/"]
        return response

    served = make_api(handler)
    first = served.post({"amount": 1}, "replay-1")
    second = served.post({"amount": 1}, "replay-1")
    assert len(runs) == 1
    assert (first.status, second.status) == (201, 201)
    assert second.body == first.body
    assert second.replayed
    assert not first.replayed
    for name in ("content-type", "location", "x-request", "set-cookie"):
        assert second.headers[name] == first.headers[name]
    # Reordered keys and other spacing are the same JSON body: a replay, not a 422.
    third = served.post('{ "amount" : 1 }', "replay-1")
    assert third.status == 201
    assert third.body == first.body
    assert third.replayed


def test_a_key_reused_with_another_request_gets_422(make_api: MakeApi) -> None:
    served = make_api(lambda request, ctx: created({"ok": True}))
    assert served.post({"amount": 1}, "reuse").status == 201
    reply = served.post({"amount": 2}, "reuse")
    assert reply.status == 422
    assert problem_type(reply) == "key-reused"
    other_path = served.client.request("PATCH", "/payments", body={"amount": 1}, key="reuse")
    assert other_path.status == 422  # another method is another request


def test_missing_or_invalid_keys_get_400_and_nothing_runs(make_api: MakeApi) -> None:
    runs: list[int] = []
    served = make_api(counted(runs, lambda: created({})))
    missing = served.post({"amount": 1})
    assert missing.status == 400
    assert problem_type(missing) == "key-missing"
    for bad in ("x" * 256, "", "caf\u00e9", "tab\there"):
        raw = bad.encode("latin-1")
        reply = served.client.request(
            "POST", "/payments", body={"a": 1}, headers={"Idempotency-Key": raw.decode("latin-1")}
        )
        assert reply.status == 400, bad
        assert problem_type(reply) == "key-invalid"
    assert runs == []
    # The draft's Structured Field String and the bare token name the same key.
    assert served.post({"amount": 1}, '"sf-1"').status == 201
    assert served.post({"amount": 1}, "sf-1").replayed
    assert served.post({"amount": 1}, "k" * 255).status == 201
    assert len(runs) == 2


def test_two_callers_with_the_same_key_never_see_each_others_response(
    make_api: MakeApi, ddb: DynamoDBClient, ledger_table: str
) -> None:
    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        record_effect(ctx, {"caller": ctx.caller}, table=ledger_table)
        return created({"caller": ctx.caller, "body": request.json()})

    served = make_api(handler)
    alice, bob = served.client.as_caller("AKIAALICE"), served.client.as_caller("AKIABOB")
    a = alice.request("POST", "/payments", body={"amount": 1}, key="shared")
    b = bob.request("POST", "/payments", body={"amount": 2}, key="shared")
    assert (a.status, b.status) == (201, 201)  # not 422: another caller, another key space
    assert "AKIAALICE" in a.json()["caller"]
    assert "AKIABOB" in b.json()["caller"]
    assert alice.request("POST", "/payments", body={"amount": 1}, key="shared").body == a.body
    assert bob.request("POST", "/payments", body={"amount": 2}, key="shared").body == b.body
    assert len(ledger_entries(ddb, ledger_table)) == 2


def test_a_5xx_is_not_final_and_the_retry_runs_again(make_api: MakeApi) -> None:
    attempts: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            return {"statusCode": 503, "body": "busy"}
        if ctx.attempt == 2:
            raise RuntimeError("database password is hunter2")
        return created({"attempt": ctx.attempt})

    served = make_api(handler)
    first = served.post({"amount": 1}, "flaky")
    assert (first.status, first.body) == (503, b"busy")
    second = served.post({"amount": 1}, "flaky")
    assert second.status == 500
    assert problem_type(second) == "handler-failed"
    assert b"hunter2" not in second.body  # an exception's text never reaches the client
    third = served.post({"amount": 1}, "flaky")
    assert third.status == 201
    assert not third.replayed
    assert served.post({"amount": 1}, "flaky").replayed
    assert attempts == [1, 2, 3]


def test_a_4xx_is_final_and_replayed(make_api: MakeApi) -> None:
    runs: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(1)
        return {"statusCode": 402, "body": '{"error": "card declined"}'}

    served = make_api(handler)
    assert served.post({"amount": 1}, "declined").status == 402
    again = served.post({"amount": 1}, "declined")
    assert again.status == 402
    assert again.replayed
    assert runs == [1]


def test_binary_bodies_reach_the_handler_and_come_back_byte_for_byte(make_api: MakeApi) -> None:
    import base64

    payload = bytes(range(256)) * 4
    seen: list[bytes] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        seen.append(request.body)
        return {
            "statusCode": 200,
            "headers": {"content-type": "application/octet-stream"},
            "body": base64.b64encode(request.body[::-1]).decode(),
            "isBase64Encoded": True,
        }

    served = make_api(handler)
    headers = {"content-type": "image/png"}
    first = served.post(payload, "bin", headers=headers)
    second = served.post(payload, "bin", headers=headers)
    assert seen == [payload]
    assert first.body == payload[::-1]
    assert second.body == payload[::-1]
    assert second.replayed
    changed = served.post(payload[:-1] + b"\x00", "bin", headers=headers)
    assert changed.status == 422  # one byte differs: another request


def test_a_response_over_the_cap_succeeds_and_its_replay_says_so(make_api: MakeApi) -> None:
    big = "x" * (80 * 1024)

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        return created({"blob": big})

    served = make_api(handler, result_cap_bytes=64 * 1024)
    first = served.post({"amount": 1}, "big")
    assert first.status == 201
    assert first.json() == {"blob": big}
    replay = served.post({"amount": 1}, "big")
    assert replay.status == 201
    assert replay.replayed
    assert problem_type(replay) == "response-not-stored"
    document = replay.json()
    assert document["original_body_bytes"] == len(first.body)
    assert replay.headers["location"] == "/payments/p-1"  # the chosen headers still replay
    assert served.api.last_result is not None
    assert served.api.last_result.outcome == "replayed"


def test_other_methods_and_an_optional_key_run_without_a_record(make_api: MakeApi) -> None:
    runs: list[int] = []
    served = make_api(counted(runs, lambda: {"n": len(runs)}))
    assert served.client.request("GET", "/payments").json() == {"n": 1}
    assert served.client.request("GET", "/payments", key="ignored").json() == {"n": 2}
    optional = make_api(lambda request, ctx: {"ok": True}, key_required=False)
    assert optional.post({"a": 1}).status == 200
    assert optional.api.last_result is not None
    assert optional.api.last_result.outcome == "without_key"
    assert runs == [0, 0]


def test_without_an_authenticated_caller_nothing_runs(make_api: MakeApi) -> None:
    runs: list[int] = []
    served = make_api(counted(runs, lambda: created({})), iam_auth=False)
    reply = served.post({"a": 1}, "k")
    assert reply.status == 500
    assert problem_type(reply) == "server-misconfigured"
    assert runs == []
    public = make_api(lambda request, ctx: created({}), iam_auth=False, caller=lambda r: "public")
    assert public.post({"a": 1}, "k").status == 201


def test_the_gateway_refuses_unsigned_requests_as_api_gateway_does(make_api: MakeApi) -> None:
    served = make_api(lambda request, ctx: created({}))
    unsigned = served.client.__class__(served.client.endpoint, credentials=None)
    reply = unsigned.request("POST", "/payments", body={"a": 1}, key="k")
    assert reply.status == 403
    assert reply.json() == {"message": "Forbidden"}
    assert served.client.request("POST", "/elsewhere", body={}).status == 404
