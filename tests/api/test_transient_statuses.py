"""A handler's 408, 425, 429 and 503 say "not now", not "no": none is the key's final answer.
Stored as final, every retry with the key would be replayed the refusal and the request could
never run. Like a 5xx, each is kept FAILED and retryable, and the retry runs again; other 4xx
(a declined card) stay final (test_http_semantics.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exactly_once import HttpRequest, RequestContext, Status
from exactly_once.http.results import ApiOutcome
from exactly_once.stores.protocol import Store
from tests.api.conftest import MakeApi

TRANSIENT = [408, 425, 429, 503]


@pytest.mark.parametrize("status", TRANSIENT)
def test_a_transient_answer_is_not_final_and_the_retry_runs_again(
    make_api: MakeApi, status: int
) -> None:
    attempts: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            return {"statusCode": status, "headers": {"retry-after": "2"}, "body": "not now"}
        return {"statusCode": 201, "body": json.dumps({"attempt": ctx.attempt})}

    served = make_api(handler)
    first = served.post({"amount": 1}, "busy-1")
    assert (first.status, first.body, first.headers["retry-after"]) == (status, b"not now", "2")
    assert served.api.last_result is not None
    assert served.api.last_result.outcome is ApiOutcome.FAILED
    store: Store = served.api.configured()[1]
    record = store.get(served.api.configured()[0].scope, served.api.last_result.key or "")
    assert record is not None
    assert record.status is Status.FAILED
    assert record.error is not None
    assert record.error.retryable

    second = served.post({"amount": 1}, "busy-1")
    assert (second.status, second.replayed) == (201, False), second.body
    third = served.post({"amount": 1}, "busy-1")
    assert (third.status, third.replayed) == (201, True)
    assert attempts == [1, 2]


@pytest.mark.parametrize("status", [400, 404, 409, 410, 422])
def test_other_4xx_answers_stay_final(make_api: MakeApi, status: int) -> None:
    runs: list[int] = []

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        runs.append(ctx.attempt)
        return {"statusCode": status, "body": "no"}

    served = make_api(handler)
    assert served.post({"amount": 1}, "no-1").status == status
    again = served.post({"amount": 1}, "no-1")
    assert (again.status, again.replayed) == (status, True)
    assert runs == [1]
