"""A step's writes asked for in the other store's way: `step.write` / `step.put` (DynamoDB's
TransactWriteItems entries) on PostgreSQL, `step.transaction` (PostgreSQL's) on DynamoDB.

Both are a ConfigurationError that names what to use instead, as `ctx.transaction` on DynamoDB
is: raised inside the step's fn, before anything of the step is written, so nothing of it
commits and the key stays retryable (the error kept on the record says why). Behind every
entry point it ends as any raise of the business function does: the record is reported failed
and delivered again (SQS, SNS, streams), the API answers 500 handler-failed and a retry runs it
again; once the code is fixed the next delivery resumes after the finished steps.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from exactly_once import begin
from exactly_once.context import LockedContext
from exactly_once.errors import ConfigurationError
from exactly_once.steps.step import Step
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status
from tests.steps.entry_support import PostgresBooks
from tests.steps.test_steps_entry_points import (
    _store_from_the_test_only,
    books,
    driver,
    entry,
    make_api,
    order,
    reader,
    store_options,
)

__all__ = [
    "_store_from_the_test_only",
    "books",
    "driver",
    "entry",
    "make_api",
    "reader",
    "store_options",
]

LEASE_S = 60
ITEM = {"pk": {"S": "p"}, "sk": {"S": "s"}}


def _dynamodb_write(how: str) -> Any:
    def fn(step: Step) -> str:
        if how == "put":
            step.put("a-table", ITEM, new_only=("pk", "sk"))
        else:
            step.write({"Put": {"TableName": "a-table", "Item": ITEM}})
        return "written"

    return fn


@pytest.mark.parametrize("backend", ["postgres"])
@pytest.mark.parametrize("how", ["write", "put"])
def test_step_write_on_postgresql_is_a_configuration_error_naming_step_transaction(
    store: Store, scope: str, how: str
) -> None:
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None
    with pytest.raises(ConfigurationError, match=r"step\.transaction") as raised:
        holder.step("charge", _dynamodb_write(how))
    assert f"step.{how}" in str(raised.value)
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.steps) == (Status.IN_PROGRESS, {})  # nothing of it committed
    # The holder goes on: the same step, written the PostgreSQL way, runs and is kept.
    assert holder.step("charge", lambda step: "charged") == "charged"


@pytest.mark.parametrize("backend", ["dynamodb"])
def test_step_transaction_on_dynamodb_is_a_configuration_error_naming_step_write(
    store: Store, scope: str
) -> None:
    holder = begin(scope, "k", store=store, lease_s=LEASE_S).lock
    assert holder is not None

    def fn(step: Step) -> str:
        step.transaction.execute("SELECT 1")
        return "written"

    with pytest.raises(ConfigurationError, match=r"step\.write") as raised:
        holder.step("charge", fn)
    assert "PostgreSQL" in str(raised.value)
    assert "step.put" in str(raised.value)  # both ways of giving a step its writes
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.steps) == (Status.IN_PROGRESS, {})
    assert holder.step("charge", lambda step: "charged") == "charged"


@pytest.mark.parametrize("backend", ["postgres"])
def test_step_put_on_postgresql_behind_each_entry_point_is_retryable_and_resumes_once_fixed(
    entry: str, driver: Any, books: PostgresBooks, reader: Store, scope: str
) -> None:
    """charge commits; ship calls `step.put` on PostgreSQL: a ConfigurationError, retryable
    like any raise of the business function (the record keeps it, with what to use instead);
    the fixed code's delivery resumes at ship and runs each step once."""
    code = {"fixed": False}

    def work(ctx: LockedContext, oid: str) -> Any:
        ctx.step("charge", lambda s: books.record(s, oid))

        def ship(step: Step) -> str:
            if code["fixed"]:
                books.record(step, oid)
            else:
                step.put("shipments", ITEM)
            return "shipped"

        return ctx.step("ship", ship)

    deliver = driver(work)
    oid = order()
    first = deliver.deliver(oid)
    assert first.verdict == "retry", first
    if entry in ("sqs", "sns", "stream"):
        assert first.detail == "failed", first
    if entry == "http":
        assert first.detail == "handler-failed", first
    if entry == "once":
        assert first.detail == "ConfigurationError", first
    assert books.effects(oid) == Counter({"charge": 1})
    record = reader.get(*_record_of(deliver, entry, scope, oid))
    assert record is not None
    assert record.status is Status.FAILED
    assert record.error is not None
    assert record.error.retryable
    assert record.error.type == "ConfigurationError"
    if entry != "http":  # the API keeps no exception text (it may hold secrets)
        assert "step.transaction" in record.error.message
    assert [p.name for _, p in sorted(record.steps.items())] == ["charge"]

    again = deliver.deliver(oid)  # the code is still wrong: still retryable, nothing lost
    assert again.verdict == "retry", again
    code["fixed"] = True
    assert deliver.deliver(oid).verdict == "done"
    assert books.effects(oid) == Counter({"charge": 1, "ship": 1})


def _record_of(deliver: Any, entry: str, scope: str, oid: str) -> tuple[str, str]:
    """(scope, key) of the order's record: the API's own scope, and the key scoped to its
    caller (as its last request was answered)."""
    if entry != "http":
        return scope, oid
    config, _ = deliver.served.api.configured()
    return str(config.scope), str(deliver.served.api.last_result.key)
