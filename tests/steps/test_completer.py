"""The completer finishes resumable keys nobody will deliver again, on both stores: it runs the
remaining steps only, from the input the key kept, through the fenced acquire (a live holder
is never disturbed, two completers never both run a step), and leaves alone a key that kept no
input. Then the HTTP story: a request whose client gave up is finished by the completer, and
the client's later retry with the same Idempotency-Key gets the result."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from exactly_once import HttpRequest, RequestContext, begin
from exactly_once.effects import LeaseLost
from exactly_once.steps.completer import Abandoned, Completer, complete_abandoned
from exactly_once.steps.runner import INPUT
from exactly_once.stores.protocol import Store
from exactly_once.stores.schema import Status
from tests.api.conftest import MakeApi, make_api
from tests.api.test_http_semantics import created
from tests.conftest import FakeClock
from tests.steps.completer_support import (
    STEPS,
    Books,
    Checkout,
    Freeze,
    Holder,
    ProviderDown,
    once_each,
)

__all__ = ["make_api"]  # the API harness's fixture, used by the HTTP test

ORDER = {"id": "o-1", "item": "book"}


@pytest.fixture
def books(store: Store, request: pytest.FixtureRequest) -> Books:
    return Books(store, request)


def fence_of(step_result: str) -> int:
    """The fence a step ran at, from its result ("email-o-1-fence-<fence>")."""
    return int(step_result.rsplit("-", 1)[1])


def frozen_holder(checkout: Checkout, freeze: Freeze, key: str = "o-1") -> Holder:
    """A holder of order `key` that froze in the step `freeze` names (a process dead there)."""
    holder = Holder(lambda: checkout.resumable.run(key, {**ORDER, "id": key}))
    holder.start()
    assert freeze.reached.wait(30)
    return holder


def test_a_holder_dead_after_two_steps_is_finished_by_the_completer(
    store: Store, scope: str, clock: FakeClock, books: Books
) -> None:
    freeze = Freeze(at="email")
    checkout = Checkout(scope, books, store, freeze=freeze)
    holder = frozen_holder(checkout, freeze)
    try:
        assert books.effects("o-1") == {"charge": 1, "ship": 1}
        clock.advance(30)  # the dead holder's lease (10 s) ends
        report = complete_abandoned([checkout.resumable], store=store)
        assert [(o.key, o.outcome, o.resumed_after) for o in report.outcomes] == [
            ("o-1", "completed", 2)
        ]
        assert once_each(books.effects("o-1"))
        assert checkout.ran == {"charge": 1, "ship": 1, "email": 2}  # the dead one, then ours
        record = store.get(scope, "o-1")
        assert record is not None
        assert record.status is Status.COMPLETED
        ours = report.completed[0].fence
        assert fence_of(record.result["email"]) == ours
        assert fence_of(record.result["charge"]) < ours  # the dead holder's recovery point
        assert checkout.resumable.run("o-1", ORDER) == record.result  # stored: nothing runs
    finally:
        freeze.thaw()
        holder.join(30)
    assert isinstance(holder.error, LeaseLost)  # the zombie's email is refused ...
    assert once_each(books.effects("o-1"))  # ... and so is its effect
    assert checkout.ran["email"] == 2


def test_a_live_holder_is_not_disturbed(
    store: Store, scope: str, clock: FakeClock, books: Books
) -> None:
    freeze = Freeze(at="email")
    checkout = Checkout(scope, books, store, freeze=freeze)
    holder = frozen_holder(checkout, freeze)
    try:
        clock.advance(5)  # slow, not dead: its lease is live
        assert complete_abandoned([checkout.resumable], store=store).outcomes == []
        listed = store.get(scope, "o-1")
        assert listed is not None
        # Even handed the key (as if it were listed a moment before), it is not taken.
        completer = Completer([checkout.resumable], store=store)
        outcome = completer.complete(Abandoned(checkout.resumable, "o-1", listed, store))
        assert outcome.outcome == "skipped"
        assert "live holder" in outcome.detail
        after = store.get(scope, "o-1")
        assert after is not None
        assert (after.fence, after.lock_token) == (listed.fence, listed.lock_token)
    finally:
        freeze.thaw()
        holder.join(30)
    assert holder.error is None
    assert fence_of(holder.result["email"]) == listed.fence  # its own step, at its own fence
    assert once_each(books.effects("o-1"))
    assert checkout.ran == dict.fromkeys(STEPS, 1)


def test_two_completers_never_both_run_a_step(
    store: Store, scope: str, clock: FakeClock, books: Books
) -> None:
    freeze = Freeze(at="email")
    checkout = Checkout(scope, books, store, freeze=freeze)
    holder = frozen_holder(checkout, freeze)
    clock.advance(30)
    first, second = (
        Completer([checkout.resumable], store=store),
        Completer([checkout.resumable], store=store),
    )
    both_listed = list(first.abandoned()), list(second.abandoned())
    assert [len(listed) for listed in both_listed] == [1, 1]
    seen: list[Any] = []
    # The second completer tries while the first is inside the email step; then again after.
    checkout.during["email"] = lambda: seen.append(second.complete(both_listed[1][0]))
    try:
        done = first.complete(both_listed[0][0])
    finally:
        freeze.thaw()
        holder.join(30)
    late = second.complete(both_listed[1][0])
    assert done.outcome == "completed"
    assert [(o.outcome, o.detail) for o in seen] == [
        ("skipped", "held by a live holder (a redelivery, another completer): left to it")
    ]
    assert (late.outcome, late.detail) == ("skipped", "completed meanwhile")
    assert once_each(books.effects("o-1"))


def test_two_completers_at_once_finish_each_key_once(
    store: Store, scope: str, clock: FakeClock, books: Books
) -> None:
    frozen = []
    freezes = [Freeze(at=name) for name in ("ship", "email", "email")]
    checkouts = [
        Checkout(scope + "-" + str(i), books, store, freeze=f) for i, f in enumerate(freezes)
    ]
    for i, (checkout, freeze) in enumerate(zip(checkouts, freezes, strict=True)):
        frozen.append(frozen_holder(checkout, freeze, key=f"o-{i}"))
    clock.advance(30)
    resumables = [c.resumable for c in checkouts]
    start = threading.Barrier(2)
    reports: list[Any] = []

    def complete() -> None:
        start.wait(30)
        reports.append(complete_abandoned(resumables, store=store))

    racers = [threading.Thread(target=complete) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
    for freeze, holder in zip(freezes, frozen, strict=True):
        freeze.thaw()
        holder.join(30)
    completed = sorted(o.key for report in reports for o in report.completed)
    assert completed == ["o-0", "o-1", "o-2"]  # each by one completer only
    for i in range(3):
        assert once_each(books.effects(f"o-{i}"))


def test_a_key_that_kept_no_input_is_left_alone(
    store: Store, scope: str, clock: FakeClock, books: Books
) -> None:
    checkout = Checkout(scope, books, store)
    lock = begin(scope, "plain", store=store, lease_s=10).lock  # stepped, not a resumable's run
    lock.step("charge", lambda step: "ch_1")
    clock.advance(30)
    before = store.get(scope, "plain")
    report = complete_abandoned([checkout.resumable], store=store)
    assert [(o.key, o.outcome) for o in report.outcomes] == [("plain", "skipped")]
    assert "no stored input" in report.skipped[0].detail
    after = store.get(scope, "plain")
    assert before is not None
    assert after is not None
    assert INPUT not in after.steps
    assert (after.status, after.fence, after.lock_token, after.attempts) == (
        before.status,
        before.fence,
        before.lock_token,
        before.attempts,
    )
    assert checkout.ran == {}


def test_keys_of_other_scopes_are_not_listed(
    store: Store, scope: str, clock: FakeClock, books: Books
) -> None:
    ours, theirs = (
        Checkout(scope, books, store, failing={"email"}),
        Checkout(scope + "-other", books, store, failing={"email"}),
    )
    for checkout in (ours, theirs):
        with pytest.raises(ProviderDown):
            checkout.resumable.run("o-1", ORDER)
    report = complete_abandoned([ours.resumable], store=store)
    assert [(o.key, o.outcome) for o in report.outcomes] == [("o-1", "failing")]
    assert theirs.ran == dict.fromkeys(STEPS, 1)


def test_a_retryable_failure_is_retried_until_it_completes(
    store: Store, scope: str, clock: FakeClock, books: Books
) -> None:
    checkout = Checkout(scope, books, store, failing={"email"})
    with pytest.raises(ProviderDown):
        checkout.resumable.run("o-1", ORDER)
    still = complete_abandoned([checkout.resumable], store=store)
    assert [(o.outcome, o.resumed_after) for o in still.outcomes] == [("failing", 2)]
    assert still.failing[0].detail.startswith("retryable: ProviderDown")
    bounded = complete_abandoned([checkout.resumable], store=store, max_attempts=2)
    assert "tried 2 times" in bounded.skipped[0].detail
    checkout.failing.clear()  # the provider is back
    done = complete_abandoned([checkout.resumable], store=store)
    assert [o.outcome for o in done.outcomes] == ["completed"]
    assert once_each(books.effects("o-1"))
    assert checkout.ran == {"charge": 1, "ship": 1, "email": 3}
    assert complete_abandoned([checkout.resumable], store=store).outcomes == []


def test_a_request_whose_client_gave_up_is_finished_and_its_retry_gets_the_result(
    make_api: MakeApi, store: Store, scope: str, books: Books, request: pytest.FixtureRequest
) -> None:
    checkout = Checkout(scope, books, store, failing={"email"})

    def handler(request: HttpRequest, ctx: RequestContext) -> dict[str, Any]:
        # The checkout's key is the request's (caller|Idempotency-Key): one checkout per key.
        return created(checkout.resumable.run(ctx.key, request.json()))

    # The API keeps its own records in the same store as the checkout's.
    on_postgres = {"table_name": None, "dsn": request.getfixturevalue("pg_dsn")}
    served = make_api(handler, **(on_postgres if store.backend == "postgres" else {}))
    first = served.post(ORDER, "pay-1")
    assert first.status == 500  # the email provider was down; the client gives up here
    assert books.effects("o-1") == {"charge": 1, "ship": 1}
    checkout.failing.clear()
    report = complete_abandoned([checkout.resumable], store=store)
    assert [(o.outcome, o.resumed_after) for o in report.outcomes] == [("completed", 2)]
    assert once_each(books.effects("o-1"))
    retried = served.post(ORDER, "pay-1")  # the client comes back, days later
    assert retried.status == 201
    assert fence_of(retried.json()["email"]) == report.completed[0].fence
    assert fence_of(retried.json()["charge"]) < report.completed[0].fence
    assert once_each(books.effects("o-1"))
    assert checkout.ran == {"charge": 1, "ship": 1, "email": 2}  # failed once, then ours
