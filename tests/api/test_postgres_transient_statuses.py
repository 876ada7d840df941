"""On PostgreSQL, a handler's "not now" (408, 425, 429) and its 5xx are not the key's final
answer, and the writes it made in `ctx.transaction` go with it: rolled back, never committed
beside a FAILED record, so the retry that runs again writes them once. A final 4xx commits them
with its stored response, as a 2xx does."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exactly_once import HttpRequest, RequestContext
from tests.api.conftest import MakeApi
from tests.api.test_postgres_api import payments, rows

__all__ = ["payments"]  # the fixture, used by name


def pay_after(status: int, table: str) -> Any:
    """Writes the payment, then answers `status` on the first attempt and 201 after."""

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        body = request.json()
        ctx.transaction.execute(
            f"INSERT INTO {table} (account, amount) VALUES (%s, %s)",  # noqa: S608
            (body["account"], ctx.attempt),
        )
        if ctx.attempt == 1:
            return {"statusCode": status, "body": "not now"}
        return {"statusCode": 201, "body": json.dumps({"attempt": ctx.attempt})}

    return handler


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
def test_a_transient_answer_rolls_back_its_writes_and_the_retry_writes_once(
    make_api: MakeApi, pg_dsn: str, payments: str, status: int
) -> None:
    served = make_api(pay_after(status, payments), table_name=None, dsn=pg_dsn)
    first = served.post({"account": "a-1"}, "busy-1")
    assert first.status == status
    assert rows(pg_dsn, payments) == []  # nothing committed with the refusal

    second = served.post({"account": "a-1"}, "busy-1")
    assert (second.status, second.replayed) == (201, False), second.body
    third = served.post({"account": "a-1"}, "busy-1")
    assert (third.status, third.replayed) == (201, True)
    assert rows(pg_dsn, payments) == [("a-1", 2)]


@pytest.mark.parametrize("status", [400, 402, 409, 422])
def test_a_final_4xx_commits_its_writes_with_the_stored_answer(
    make_api: MakeApi, pg_dsn: str, payments: str, status: int
) -> None:
    served = make_api(pay_after(status, payments), table_name=None, dsn=pg_dsn)
    assert served.post({"account": "a-2"}, "no-1").status == status
    again = served.post({"account": "a-2"}, "no-1")
    assert (again.status, again.replayed) == (status, True)
    assert rows(pg_dsn, payments) == [("a-2", 1)]
