"""Every outcome of `begin`, against DynamoDB Local: the lock, or what became of the key."""

from __future__ import annotations

import os
import socket
from decimal import Decimal
from typing import TYPE_CHECKING

import pytest

from exactly_once import (
    ClaimStatus,
    ConfigurationError,
    IdempotencyStore,
    NotAcquired,
    PermanentError,
    Status,
    begin,
    lifecycle,
)
from exactly_once.effects import LeaseLost
from exactly_once.stores import schema
from exactly_once.stores.records import ErrorInfo
from tests.conftest import FakeClock
from tests.once.conftest import MARGIN_MS, raw_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from local_aws.dynamodb_local import DynamoDBLocal


def test_a_new_key_is_acquired_with_its_lock(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    claim = begin(scope, "k", expected_duration_s=20, store=store)
    assert claim.status is ClaimStatus.ACQUIRED
    assert claim.acquired
    assert (claim.takeover, claim.retry) == (False, False)
    lock = claim.lock
    assert (lock.key, lock.attempt, lock.scope) == ("k", 1, scope)
    assert lock.fence == int(clock.now * 1000) + 1
    assert lock.owner == f"{socket.gethostname()}:{os.getpid()}:{lifecycle.instance_id()}"
    assert claim.owner == lock.owner
    assert lock.outcome is None
    assert claim.lease_ends_at == lock.lease_ends_at == clock.now + 20 + MARGIN_MS / 1000
    assert (claim.result, claim.error, claim.retryable) == (None, None, False)
    item = raw_item(store, scope, "k")
    assert item[schema.STATUS]["S"] == Status.IN_PROGRESS
    assert item[schema.OWNER]["S"] == lock.owner


def test_a_completed_key_returns_its_result_with_its_types(
    store: IdempotencyStore, scope: str
) -> None:
    result = {
        "amount": Decimal("10.10"),
        "pair": (1, "two"),
        "tags": {"a", "b"},
        "frozen": frozenset({3}),
        "raw": b"\x00\xff",
        "by_id": {7: "seven"},
        "big": 2**80,
    }
    first = begin(scope, "k", store=store, owner="first")
    first.lock.succeed(result)
    assert first.lock.outcome is Status.COMPLETED

    again = begin(scope, "k", store=store, owner="second")
    assert again.status is ClaimStatus.COMPLETED
    assert not again.acquired
    assert again.result == result
    assert type(again.result["pair"]) is tuple
    assert type(again.result["amount"]) is Decimal
    assert type(again.result["frozen"]) is frozenset
    assert again.result_omitted is None
    assert again.owner == "first"
    assert again.lease_ends_at is None
    with pytest.raises(NotAcquired, match="completed"):
        again.lock  # noqa: B018 (the property raises)


def test_a_result_that_cannot_be_stored_is_said_so(store: IdempotencyStore, scope: str) -> None:
    begin(scope, "k", store=store).lock.succeed(object())
    again = begin(scope, "k", store=store)
    assert again.status is ClaimStatus.COMPLETED
    assert again.result is None
    assert again.result_omitted is not None
    assert "not storable" in again.result_omitted


def test_a_live_lock_is_in_progress_until_its_lease_ends(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    holder = begin(scope, "k", lease_s=30, store=store, owner="holder")
    clock.advance(29)
    other = begin(scope, "k", store=store, owner="other")
    assert other.status is ClaimStatus.IN_PROGRESS
    assert other.lease_ends_at == holder.lock.lease_ends_at
    assert other.owner == "holder"
    with pytest.raises(NotAcquired, match="in_progress"):
        other.lock  # noqa: B018 (the property raises)


def test_an_expired_lease_is_taken_over_with_a_higher_fence(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    died = begin(scope, "k", lease_s=30, store=store, owner="died")
    clock.advance(31)
    claim = begin(scope, "k", store=store, owner="next")
    assert claim.acquired
    assert claim.takeover
    assert claim.lock.fence > died.lock.fence
    assert claim.lock.attempt == 2


def test_a_retryable_failure_keeps_the_error_and_the_next_begin_runs_again(
    store: IdempotencyStore, scope: str
) -> None:
    first = begin(scope, "k", store=store)
    first.lock.fail(TimeoutError("upstream timed out"))  # retryable by default
    assert first.lock.outcome is Status.FAILED
    error = store.get(scope, "k")
    assert error is not None
    assert error.error == ErrorInfo("TimeoutError", "upstream timed out", retryable=True)

    again = begin(scope, "k", store=store)
    assert again.acquired
    assert again.retry
    assert again.lock.attempt == 2
    assert again.lock.fence > first.lock.fence


def test_a_permanent_failure_is_returned_until_an_operator_resets_it(
    store: IdempotencyStore, scope: str
) -> None:
    begin(scope, "k", store=store).lock.fail(PermanentError("card declined"))
    failed = begin(scope, "k", store=store)
    assert failed.status is ClaimStatus.FAILED
    assert failed.error == ErrorInfo("PermanentError", "card declined", retryable=False)
    assert not failed.retryable
    assert failed.result is None

    assert store.reset(scope, "k")  # what `eonce` does for a person
    assert begin(scope, "k", store=store).acquired


@pytest.mark.parametrize(
    ("error", "retryable", "expected"),
    [
        ("quota used up", None, ErrorInfo("Failed", "quota used up", True)),
        ("quota used up", False, ErrorInfo("Failed", "quota used up", False)),
        (ErrorInfo("Declined", "no", False), None, ErrorInfo("Declined", "no", False)),
        (ErrorInfo("Declined", "no", False), True, ErrorInfo("Declined", "no", True)),
        (ValueError("bad"), False, ErrorInfo("ValueError", "bad", False)),
        (PermanentError("gone"), True, ErrorInfo("PermanentError", "gone", True)),
    ],
)
def test_fail_takes_an_exception_an_error_info_or_a_message(
    store: IdempotencyStore,
    scope: str,
    error: BaseException | ErrorInfo | str,
    retryable: bool | None,
    expected: ErrorInfo,
) -> None:
    begin(scope, "k", store=store).lock.fail(error, retryable)
    record = store.get(scope, "k")
    assert record is not None
    assert record.error == expected


def test_the_same_key_with_another_fingerprint_is_a_mismatch(
    store: IdempotencyStore, scope: str
) -> None:
    begin(scope, "k", fingerprint="order-a", store=store).lock.succeed("done")
    other = begin(scope, "k", fingerprint="order-b", store=store)
    assert other.status is ClaimStatus.MISMATCH
    assert other.result is None  # another input's result is not this one's
    same = begin(scope, "k", fingerprint="order-a", store=store)
    assert (same.status, same.result) == (ClaimStatus.COMPLETED, "done")


def test_a_blocked_takeover_fails_the_key_for_a_person_and_fences_out_the_old_holder(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    old = begin(scope, "k", lease_s=30, store=store, owner="old")
    clock.advance(31)
    blocked = begin(scope, "k", store=store, block_takeover=True)
    assert blocked.status is ClaimStatus.FAILED
    assert blocked.error is not None
    assert (blocked.error.type, blocked.error.retryable) == ("LeaseExpired", False)
    assert "old" in blocked.error.message
    with pytest.raises(LeaseLost):
        old.lock.succeed("late")  # it may have done the work: a person decides, not it
    assert begin(scope, "k", store=store).status is ClaimStatus.FAILED


def test_block_takeover_defaults_to_the_environment(
    store: IdempotencyStore, scope: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    begin(scope, "k", lease_s=30, store=store)
    clock.advance(31)
    monkeypatch.setenv("BLOCK_EXPIRED_LEASES", "true")
    assert begin(scope, "k", store=store).status is ClaimStatus.FAILED
    begin(scope, "j", lease_s=30, store=store)
    clock.advance(31)
    assert begin(scope, "j", store=store, block_takeover=False).acquired


class TestLease:
    def test_lease_s_is_the_lease(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        claim = begin(scope, "k", lease_s=7.5, expected_duration_s=60, store=store)
        now = clock.now
        assert claim.lock.lease_ends_at == now + 7.5
        assert raw_item(store, scope, "k")[schema.EXPECTED_BY]["N"] == str(int(now * 1000) + 60_000)

    def test_the_expected_duration_plus_the_margin_from_the_environment(
        self,
        store: IdempotencyStore,
        scope: str,
        clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setenv("LEASE_MARGIN_MS", "2000")
        claim = begin(scope, "k", expected_duration_s=10, store=store)
        assert claim.lock.lease_ends_at == clock.now + 12

    def test_neither_is_a_minute_plus_the_margin_and_expected_by_its_end(
        self,
        store: IdempotencyStore,
        scope: str,
        clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setenv("LEASE_HEARTBEAT", "off")  # held whole (tests/heartbeat: renewed)
        claim = begin(scope, "k", store=store)
        now_ms = int(clock.now * 1000)
        assert claim.lock.lease_ends_at * 1000 == now_ms + 60_000 + MARGIN_MS
        assert int(raw_item(store, scope, "k")[schema.EXPECTED_BY]["N"]) == now_ms + 65_000

    def test_in_lambda_the_remaining_time_and_the_request_name_the_lease_and_owner(
        self, store: IdempotencyStore, scope: str, clock: FakeClock
    ) -> None:
        class Context:
            function_name = "orders"
            aws_request_id = "req-1"

            def get_remaining_time_in_millis(self) -> int:
                return 9_000

        claim = begin(scope, "k", store=store, lambda_context=Context())
        assert claim.lock.owner == f"orders:req-1:{lifecycle.instance_id()}"
        assert claim.lock.lease_ends_at * 1000 == clock.now * 1000 + 9_000 + MARGIN_MS

    @pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan")])
    def test_a_duration_must_be_positive_and_finite(
        self, store: IdempotencyStore, scope: str, bad: float
    ) -> None:
        with pytest.raises(ValueError, match="lease_s"):
            begin(scope, "k", lease_s=bad, store=store)
        with pytest.raises(ValueError, match="expected_duration_s"):
            begin(scope, "k", expected_duration_s=bad, store=store)
        assert raw_item(store, scope, "k") == {}


def test_scope_and_key_must_be_given(store: IdempotencyStore) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        begin("", "k", store=store)
    with pytest.raises(ValueError, match="non-empty"):
        begin("s", "", store=store)


def test_the_table_comes_from_the_environment(
    dynamodb_local: DynamoDBLocal,
    ddb: DynamoDBClient,
    idempotency_table: str,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ConfigurationError, match="IDEMPOTENCY_TABLE"):
        begin(scope, "k")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    monkeypatch.setenv("IDEMPOTENCY_TABLE", idempotency_table)
    monkeypatch.setenv("FAILED_TTL_SECONDS", "600")
    begin(scope, "k").lock.fail("no", retryable=False)
    record = IdempotencyStore(idempotency_table, client=ddb).get(scope, "k")
    assert record is not None
    assert record.status is Status.FAILED
    assert record.expires_at_s is not None
    assert record.expires_at_s <= (record.updated_at_ms or 0) // 1000 + 600
    claim = begin(scope, "other", table_name=idempotency_table)
    assert claim.acquired


def test_after_the_record_ttl_the_key_runs_again_but_its_effect_does_not(
    store: IdempotencyStore, scope: str, clock: FakeClock, ledger_table: str
) -> None:
    """The clock passes the TTL: the record counts as absent, a new generation begins (a
    higher fence, attempt 1), and a fenced effect of the first generation still refuses."""
    from exactly_once.ledger import record_effect

    first = begin(scope, "ttl", lease_s=30, store=store)
    assert record_effect(first.lock, {"n": 1}, table=ledger_table) is not None
    first.lock.succeed("done")
    clock.advance(store.record_ttl_s + 3600)
    again = begin(scope, "ttl", lease_s=30, store=store)
    assert again.acquired
    assert again.lock.attempt == 1
    assert again.lock.fence > first.lock.fence
    assert record_effect(again.lock, {"n": 2}, table=ledger_table) is None


def test_hostile_keys_and_results_are_kept_not_refused(store: IdempotencyStore, scope: str) -> None:
    """Valid but awkward input: a lone surrogate in the key and the result, a key longer than
    a partition key allows, a result shaped like the codec's tags."""
    for key in ("\ud83d-lone", "k" * 5000):
        claim = begin(scope, key, lease_s=30, store=store)
        assert claim.acquired
        claim.lock.succeed({"__eo_set__": ["\ud83d"], "n": 10**5000})
        assert begin(scope, key, lease_s=30, store=store).result == {
            "__eo_set__": ["\ud83d"],
            "n": 10**5000,
        }
