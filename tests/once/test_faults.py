"""The lock's writes under faults: a lost reply is the write's own success, a throttle past
the retries raises after bounded attempts and writes nothing, and `extend` moves the lease.

Faults go through botocore's `before-send` hook on a client of the test's own (see
fault_injection/), against DynamoDB Local.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

import pytest
from botocore.exceptions import ClientError

from exactly_once import Claim, ClaimStatus, IdempotencyStore, Status, begin, once
from exactly_once.completion import COMPLETE_ATTEMPTS
from exactly_once.stores import schema
from exactly_once.stores.records import ErrorInfo
from fault_injection.lost_replies import install_lost_replies, lose_next
from fault_injection.throttling import THROTTLE_CODE, install_throttling
from tests.conftest import FakeClock, make_ddb_client
from tests.once.conftest import raising, raw_item, run

if TYPE_CHECKING:
    from local_aws.dynamodb_local import DynamoDBLocal

ATTEMPTS = 2  # botocore attempts per call: a lost reply is retried once


@pytest.fixture
def faulty(
    dynamodb_local: DynamoDBLocal, idempotency_table: str, clock: FakeClock
) -> IdempotencyStore:
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=ATTEMPTS)
    return IdempotencyStore(idempotency_table, client=client, clock=clock)


def test_extend_moves_the_lease_and_keeps_the_key(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    claim = begin(scope, "k", lease_s=30, expected_duration_s=20, store=store)
    expected_by = raw_item(store, scope, "k")[schema.EXPECTED_BY]
    clock.advance(25)
    new_end = claim.lock.extend(120)
    assert new_end == clock.now + 120 == claim.lock.lease_ends_at
    item = raw_item(store, scope, "k")
    assert int(item[schema.LEASE_EXPIRES_AT]["N"]) == new_end * 1000
    assert item[schema.EXPECTED_BY] == expected_by  # needing more time is being late
    clock.advance(60)  # past the first lease, inside the extended one
    other = begin(scope, "k", store=store)
    assert (other.status, other.lease_ends_at) == (ClaimStatus.IN_PROGRESS, new_end)
    claim.lock.succeed("done")
    assert begin(scope, "k", store=store).result == "done"


def test_the_inherited_extend_lease_answers_false_once_lost(
    store: IdempotencyStore, scope: str, clock: FakeClock
) -> None:
    claim = begin(scope, "k", lease_s=10, store=store)
    assert claim.lock.extend_lease(20_000) is True
    clock.advance(21)
    assert begin(scope, "k", store=store).acquired
    assert claim.lock.extend_lease(20_000) is False


def test_a_lost_reply_on_begin_is_still_this_callers_lock(
    faulty: IdempotencyStore, scope: str
) -> None:
    lost: list[str] = []
    install_lost_replies(faulty.client, lose_next("UpdateItem"), lost.append)
    claim = begin(scope, "k", store=faulty)
    assert lost == ["UpdateItem"]
    assert claim.acquired
    item = raw_item(faulty, scope, "k")
    assert (item[schema.FENCE]["N"], item[schema.ATTEMPTS]["N"]) == (str(claim.lock.fence), "1")


@pytest.mark.parametrize(
    "finish",
    ["succeed", "fail-retryable", "fail-permanent", "extend"],
)
def test_a_lost_reply_on_a_lock_write_reports_success_once(
    faulty: IdempotencyStore, scope: str, finish: str, clock: FakeClock
) -> None:
    claim = begin(scope, "k", lease_s=30, store=faulty)
    lost: list[str] = []
    install_lost_replies(faulty.client, lose_next("UpdateItem"), lost.append)
    if finish == "succeed":
        claim.lock.succeed({"n": 1})
    elif finish == "extend":
        assert claim.lock.extend(300) == clock.now + 300
    else:
        claim.lock.fail(ValueError("no"), retryable=finish == "fail-retryable")
    assert lost == ["UpdateItem"]  # applied, its reply lost, the retry met the write's own state
    item = raw_item(faulty, scope, "k")
    assert item[schema.ATTEMPTS]["N"] == "1"
    if finish == "succeed":
        assert claim.lock.outcome is Status.COMPLETED
        assert begin(scope, "k", store=faulty).result == {"n": 1}
    elif finish == "extend":
        assert int(item[schema.LEASE_EXPIRES_AT]["N"]) == (clock.now + 300) * 1000
    else:
        assert claim.lock.outcome is Status.FAILED
        assert item[schema.STATUS]["S"] == Status.FAILED
        assert item[schema.ERROR]["M"]["retryable"]["BOOL"] is (finish == "fail-retryable")


class Switch(random.Random):
    """Throttles every request while `on`."""

    on = True

    def random(self) -> float:
        return 0.0 if self.on else 1.0


@pytest.fixture
def throttled(
    dynamodb_local: DynamoDBLocal, idempotency_table: str, clock: FakeClock
) -> tuple[IdempotencyStore, Switch, list[str]]:
    """A store whose every request is throttled while the switch is on (one botocore attempt
    per call, so the test waits only for write_durably's own back-off)."""
    client = make_ddb_client(dynamodb_local.endpoint, max_attempts=1)
    switch = Switch()
    switch.on = False
    hits: list[str] = []
    install_throttling(client, 1.0, switch, hits.append)
    return IdempotencyStore(idempotency_table, client=client, clock=clock), switch, hits


@pytest.mark.parametrize("inside_the_block", [False, True])
def test_a_throttle_past_the_retries_on_succeed_raises_and_leaves_the_record_in_progress(
    throttled: tuple[IdempotencyStore, Switch, list[str]],
    scope: str,
    clock: FakeClock,
    inside_the_block: bool,
) -> None:
    store, switch, hits = throttled

    def body(claim: Claim) -> None:
        switch.on = True
        claim.lock.succeed("paid")  # the exit must not record FAILED: the work is done

    if inside_the_block:
        block = once(scope, "k", store=store)
        with pytest.raises(ClientError, match=THROTTLE_CODE):
            run(block, body)
        assert block.claim is not None
        claim = block.claim
    else:
        claim = begin(scope, "k", store=store)
        switch.on = True
        with pytest.raises(ClientError, match=THROTTLE_CODE):
            claim.lock.succeed("paid")
    assert hits == ["UpdateItem"] * COMPLETE_ATTEMPTS  # bounded: and no FAILED write after it
    switch.on = False
    item = raw_item(store, scope, "k")
    assert item[schema.STATUS]["S"] == Status.IN_PROGRESS
    assert schema.RESULT not in item
    assert claim.lock.outcome is None
    with pytest.raises(RuntimeError, match="succeed was already tried"):
        claim.lock.fail("give up")
    claim.lock.succeed("paid")  # the throttle is over: trying again is safe
    again = begin(scope, "k", store=store)
    assert (again.status, again.result) == (ClaimStatus.COMPLETED, "paid")


def test_a_throttle_past_the_retries_on_fail_leaves_the_lease_to_end_it(
    throttled: tuple[IdempotencyStore, Switch, list[str]], scope: str, clock: FakeClock
) -> None:
    store, switch, hits = throttled

    def body(claim: Claim) -> None:
        switch.on = True
        raise KeyError("the block's own error is what propagates")

    with pytest.raises(KeyError, match="propagates"):
        run(once(scope, "k", lease_s=30, store=store), body)
    assert hits == ["UpdateItem"] * COMPLETE_ATTEMPTS
    switch.on = False
    assert raw_item(store, scope, "k")[schema.STATUS]["S"] == Status.IN_PROGRESS
    clock.advance(31)
    assert begin(scope, "k", store=store).takeover


def test_a_failed_record_keeps_the_error_for_a_person(store: IdempotencyStore, scope: str) -> None:
    with pytest.raises(ValueError, match="xxx"):
        run(once(scope, "k", store=store), raising(ValueError("x" * 5000)))
    record = store.get(scope, "k")
    assert record is not None
    assert record.error == ErrorInfo("ValueError", "x" * ErrorInfo.MAX_MESSAGE, retryable=True)
