"""`@resumable(scope)` and `run(key, input)`, on both stores: the input is kept with the key
before any step, a finished key answers its stored result, a resumed key goes on with the
input its finished steps saw, and a key that is not the caller's to run says why."""

from __future__ import annotations

import pytest

from exactly_once import NotAcquired, begin
from exactly_once.claims import ClaimStatus
from exactly_once.errors import PermanentError
from exactly_once.held_lock import OnceLock
from exactly_once.steps.resumable import NotFinished, registered, resumable
from exactly_once.steps.runner import INPUT
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock
from tests.steps.completer_support import STEPS, Books, Checkout, ProviderDown, once_each

ORDER = {"id": "o-1", "item": "book"}


@pytest.fixture
def books(store: Store, request: pytest.FixtureRequest) -> Books:
    return Books(store, request)


def test_run_keeps_the_input_runs_each_step_once_and_answers_the_stored_result_after(
    store: Store, scope: str, books: Books
) -> None:
    checkout = Checkout(scope, books, store)
    result = checkout.resumable.run("o-1", ORDER)
    assert set(result) == {"order", *STEPS}
    record = store.get(scope, "o-1")
    assert record is not None
    assert record.status is Status.COMPLETED
    assert record.steps[INPUT].result == ORDER
    assert checkout.resumable.run("o-1", {"id": "ignored"}) == result  # stored: nothing runs
    assert checkout.ran == dict.fromkeys(STEPS, 1)
    assert once_each(books.effects("o-1"))


def test_the_input_is_kept_before_the_first_step_runs(store: Store, scope: str) -> None:
    """Read from the record while the first step runs, not from the points' clock times."""
    seen: list[object] = []

    @resumable(f"{scope}-input-first", store=store, lease_s=10)
    def work(lock: OnceLock, order: dict[str, str]) -> str:
        def first(step: object) -> str:
            record = store.get_by_id(lock.store_lock.record_id)
            assert record is not None
            seen.append(record.steps[INPUT].result if INPUT in record.steps else None)
            return "charged"

        return lock.step("charge", first)

    assert work.run("o-1", ORDER) == "charged"
    assert seen == [ORDER]


def test_a_resumed_key_goes_on_with_the_input_its_steps_saw(
    store: Store, scope: str, books: Books
) -> None:
    checkout = Checkout(scope, books, store, failing={"email"})
    with pytest.raises(ProviderDown):
        checkout.resumable.run("o-1", ORDER)
    record = store.get(scope, "o-1")
    assert record is not None
    assert record.status is Status.FAILED
    assert record.error is not None
    assert record.error.retryable
    checkout.failing.clear()
    result = checkout.resumable.run("o-1", {"id": "o-other"})  # a retry with other input
    assert result["order"] == "o-1"  # the kept input, not the retry's
    assert checkout.ran == {"charge": 1, "ship": 1, "email": 2}
    assert once_each(books.effects("o-1"))
    assert books.effects("o-other") == {}


def test_a_key_held_by_a_live_holder_is_not_run(
    store: Store, scope: str, clock: FakeClock, books: Books
) -> None:
    checkout = Checkout(scope, books, store)
    holder = begin(scope, "o-1", store=store, lease_s=10)
    with pytest.raises(NotFinished) as refused:
        checkout.resumable.run("o-1", ORDER)
    assert isinstance(refused.value, NotAcquired)  # as `claim.lock` raises it
    assert refused.value.claim.status is ClaimStatus.IN_PROGRESS
    assert "in_progress" in str(refused.value)
    assert "lease ends" in str(refused.value)
    assert checkout.ran == {}
    holder.lock.fail("gave up", retryable=True)
    assert checkout.resumable.run("o-1", ORDER)["order"] == "o-1"


def test_a_permanent_failure_is_recorded_and_then_answered(
    store: Store, scope: str, books: Books
) -> None:
    class Refused(PermanentError):
        pass

    @resumable(scope, store=store, lease_s=10)
    def refuse(lock: OnceLock, order: dict[str, str]) -> None:
        lock.step("charge", lambda step: "ch_1")
        raise Refused("card declined")

    with pytest.raises(Refused):
        refuse.run("o-1", ORDER)
    with pytest.raises(NotFinished) as refused:
        refuse.run("o-1", ORDER)
    assert refused.value.claim.status is ClaimStatus.FAILED
    assert "Refused: card declined" in str(refused.value)


def test_a_scope_is_resumable_by_one_function(scope: str) -> None:
    @resumable(scope)
    def first(lock: OnceLock, value: int) -> int:
        return value

    assert first in registered()
    assert first.__name__ == "first"
    assert first.scope == scope

    with pytest.raises(ValueError, match="already resumable"):

        @resumable(scope)
        def second(lock: OnceLock, value: int) -> int:
            return value

    with pytest.raises(ValueError, match="without '#'"):
        resumable("a#b")
