"""The HTTP API on the PostgreSQL store, through a real HTTP client: the payment is written in
`ctx.transaction`, so it commits with the stored response or not at all."""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from exactly_once import HttpRequest, RequestContext
from tests.api.conftest import MakeApi
from tests.api.test_http_semantics import created, problem_type


@pytest.fixture
def payments(pg_dsn: str) -> str:
    """A business table of the test's own; its unique check is deferred to COMMIT, so a
    duplicate fails only when the completion commits."""
    table = f"payments_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table} (account text, amount int, "
            f"UNIQUE (account) DEFERRABLE INITIALLY DEFERRED)"
        )
    return table


def rows(dsn: str, table: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT account, amount FROM {table} ORDER BY account").fetchall()  # noqa: S608


def pay(table: str) -> Any:
    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        body = request.json()
        ctx.transaction.execute(
            f"INSERT INTO {table} (account, amount) VALUES (%s, %s)",  # noqa: S608
            (body["account"], body["amount"]),
        )
        return created({"account": body["account"], "fence": ctx.fence})

    return handler


def test_concurrent_requests_with_one_key_pay_once_and_replay_the_same_body(
    make_api: MakeApi, pg_dsn: str, payments: str
) -> None:
    served = make_api(pay(payments), table_name=None, dsn=pg_dsn)
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(
            pool.map(lambda _: served.post({"account": "a-1", "amount": 5}, "key-1"), range(8))
        )
    finished = [r for r in replies if r.status == 201]
    assert {r.status for r in replies} <= {201, 409}
    assert len({r.body for r in finished}) == 1  # every 201, first or replayed, is one body
    again = served.post({"account": "a-1", "amount": 5}, "key-1")
    assert again.status == 201
    assert again.replayed
    assert rows(pg_dsn, payments) == [("a-1", 5)]
    reused = served.post({"account": "a-1", "amount": 6}, "key-1")
    assert reused.status == 422
    assert problem_type(reused) == "key-reused"


def test_writes_that_fail_at_commit_answer_503_and_leave_nothing(
    make_api: MakeApi, pg_dsn: str, payments: str
) -> None:
    served = make_api(pay(payments), table_name=None, dsn=pg_dsn)
    assert served.post({"account": "a-2", "amount": 1}, "first").status == 201
    clash = served.post({"account": "a-2", "amount": 2}, "second")  # the deferred unique check
    assert clash.status == 503
    assert problem_type(clash) == "not-committed"
    assert clash.headers["retry-after"] == "1"
    assert rows(pg_dsn, payments) == [("a-2", 1)]
    retried = served.post({"account": "a-3", "amount": 2}, "second")  # the key is free again
    assert retried.status == 422  # ... for its own body only: another body is another request
    assert served.post({"account": "a-2", "amount": 2}, "second").status == 503
    assert (
        json.loads(served.post({"account": "a-4", "amount": 3}, "third").body)["account"] == "a-4"
    )
