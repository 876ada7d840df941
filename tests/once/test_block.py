"""`with once(...) as claim:` records the block's outcome, and only for a claim it acquired."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Claim, ClaimStatus, IdempotencyStore, PermanentError, Status, once
from exactly_once.stores import schema
from exactly_once.stores.records import ErrorInfo
from tests.conftest import FakeClock, make_ddb_client
from tests.once.conftest import raising, run

if TYPE_CHECKING:
    from local_aws.dynamodb_local import DynamoDBLocal


class Boom(Exception):
    pass


@pytest.fixture
def counted(
    dynamodb_local: DynamoDBLocal, idempotency_table: str, clock: FakeClock
) -> tuple[IdempotencyStore, list[str]]:
    """A store whose client lists every operation it sends (retries included)."""
    client = make_ddb_client(dynamodb_local.endpoint)
    sent: list[str] = []

    def count(event_name: str = "", **_: Any) -> None:
        sent.append(event_name.rsplit(".", 1)[-1])

    client.meta.events.register("before-send.dynamodb", count)
    return IdempotencyStore(idempotency_table, client=client, clock=clock), sent


def test_a_raise_records_a_retryable_failure_and_propagates(
    store: IdempotencyStore, scope: str
) -> None:
    block = once(scope, "k", store=store)
    with pytest.raises(Boom, match="upstream down"):
        run(block, raising(Boom("upstream down")))
    assert block.claim is not None
    record = store.get(scope, "k")
    assert record is not None
    assert record.status is Status.FAILED
    assert record.error == ErrorInfo("Boom", "upstream down", retryable=True)
    assert block.claim.lock.outcome is Status.FAILED
    with once(scope, "k", store=store) as again:
        assert again.acquired  # retryable: the next run goes ahead
        assert again.retry


def test_a_permanent_error_records_a_permanent_failure(store: IdempotencyStore, scope: str) -> None:
    with pytest.raises(PermanentError):
        run(once(scope, "k", store=store), raising(PermanentError("invalid order")))
    with once(scope, "k", store=store) as again:
        assert again.status is ClaimStatus.FAILED
        assert again.error == ErrorInfo("PermanentError", "invalid order", retryable=False)


def test_a_base_exception_is_recorded_retryable_and_propagates(
    store: IdempotencyStore, scope: str
) -> None:
    with pytest.raises(KeyboardInterrupt):
        run(once(scope, "k", store=store), raising(KeyboardInterrupt()))
    record = store.get(scope, "k")
    assert record is not None
    assert (record.status, record.error and record.error.retryable) == (Status.FAILED, True)


def test_a_plain_return_completes_with_none(store: IdempotencyStore, scope: str) -> None:
    with once(scope, "k", store=store) as claim:
        assert claim.acquired
    assert claim.lock.outcome is Status.COMPLETED
    with once(scope, "k", store=store) as again:
        assert (again.status, again.result) == (ClaimStatus.COMPLETED, None)


def test_an_explicit_succeed_is_stored_once(
    counted: tuple[IdempotencyStore, list[str]], scope: str
) -> None:
    store, sent = counted
    with once(scope, "k", store=store) as claim:
        claim.lock.succeed({"invoice": 42})
        with pytest.raises(RuntimeError, match="already recorded"):
            claim.lock.succeed({"invoice": 43})
        with pytest.raises(RuntimeError, match="already recorded"):
            claim.lock.fail("late")
    assert sent == ["UpdateItem", "UpdateItem"]  # acquire, complete: nothing at the exit
    with once(scope, "k", store=store) as again:
        assert again.result == {"invoice": 42}


def test_an_explicit_fail_then_return_stays_failed(store: IdempotencyStore, scope: str) -> None:
    with once(scope, "k", store=store) as claim:
        claim.lock.fail("not today", retryable=False)
    record = store.get(scope, "k")
    assert record is not None
    assert record.status is Status.FAILED


def test_a_raise_after_succeed_keeps_the_result(store: IdempotencyStore, scope: str) -> None:
    def body(claim: Claim) -> None:
        claim.lock.succeed("paid")
        raise Boom("while logging")  # the work is done and recorded: it stays done

    with pytest.raises(Boom):
        run(once(scope, "k", store=store), body)
    with once(scope, "k", store=store) as again:
        assert (again.status, again.result) == (ClaimStatus.COMPLETED, "paid")


@pytest.mark.parametrize("raises", [False, True])
def test_a_claim_not_acquired_sees_the_outcome_and_writes_nothing(
    counted: tuple[IdempotencyStore, list[str]], scope: str, raises: bool
) -> None:
    store, sent = counted
    with once(scope, "k", store=store) as first:
        first.lock.succeed("first")
    sent.clear()

    def body(claim: Claim) -> None:
        assert (claim.status, claim.result) == (ClaimStatus.COMPLETED, "first")
        if raises:
            raise Boom

    expect: AbstractContextManager[Any] = pytest.raises(Boom) if raises else nullcontext()
    with expect:
        run(once(scope, "k", store=store), body)
    assert sent == ["UpdateItem"]  # the refused acquire, and nothing after it
    assert raw_status(store, scope) == Status.COMPLETED


def test_nothing_is_written_until_the_block_is_entered(
    counted: tuple[IdempotencyStore, list[str]], scope: str
) -> None:
    store, sent = counted
    block = once(scope, "k", store=store)
    assert sent == []
    with block as claim:
        assert claim.acquired
    assert block.claim is claim


def raw_status(store: IdempotencyStore, scope: str) -> str:
    item = store.client.get_item(
        TableName=store.table_name,
        Key={schema.PARTITION_KEY: {"S": schema.record_id(scope, "k")}},
        ConsistentRead=True,
    )["Item"]
    return item[schema.STATUS]["S"]
