"""The completer hands a resumable's function the key its first holder had, not the form the
record's id holds it in.

PostgreSQL text cannot hold NUL, so the store keeps a key with one as its SHA-256
(stores/postgres/ids.py); the completer finds keys by record id, and so it held, and handed the
function as `lock.key`, that hash. The key kept beside the input (recovery point 0) gives it
back. Other odd keys (too long, not UTF-8, `sha256:`-like) are hashed before any holder sees
them (keys.storable_key), so every holder already has the same form.
"""

from __future__ import annotations

from typing import Any

import pytest

from exactly_once import Completer, Resumable, begin
from exactly_once.keys import hashed_key, storable_key
from exactly_once.steps.runner import INPUT
from exactly_once.steps.step import Step
from exactly_once.stores import codec
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import StepPoint
from exactly_once.stores.schema import Status
from tests.conftest import FakeClock

LEASE_S = 10
KEYS = {"nul": "order\x001", "plain": "order-1", "long": "o" * 1500}


class Checkout:
    """Two steps, the second failing until `down` is cleared; notes each call's `lock.key`."""

    def __init__(self, scope: str, store: Store) -> None:
        self.down = True
        self.keys: list[str] = []
        self.inputs: list[Any] = []
        self.resumable: Resumable[dict[str, Any], dict[str, Any]] = Resumable(
            scope, self._checkout, {"store": store, "lease_s": LEASE_S}
        )

    def _checkout(self, lock: Any, order: dict[str, Any]) -> dict[str, Any]:
        self.keys.append(lock.key)
        self.inputs.append(order)

        def email(step: Step) -> str:
            if self.down:
                raise RuntimeError("the mail provider is down")
            return "sent"

        lock.step("charge", lambda step: "charged")
        return {"key": lock.key, "email": lock.step("email", email)}


@pytest.mark.parametrize("kind", list(KEYS))
def test_the_completer_hands_the_function_the_key_its_first_holder_had(
    store: Store, scope: str, clock: FakeClock, kind: str
) -> None:
    key = KEYS[kind]
    checkout = Checkout(scope, store)
    with pytest.raises(RuntimeError):
        checkout.resumable.run(key, {"id": 1})
    checkout.down = False
    clock.advance(LEASE_S + 1)
    report = Completer([checkout.resumable], store=store).run(log=False)
    assert [o.outcome for o in report.outcomes] == ["completed"], report.outcomes
    assert checkout.keys[1] == checkout.keys[0]  # the first holder's, whatever its form
    assert checkout.inputs == [{"id": 1}, {"id": 1}]
    # The recorded result, and the caller's later run, see the same key too.
    assert checkout.resumable.run(key, {"id": 2}) == {"key": checkout.keys[0], "email": "sent"}


@pytest.mark.parametrize("kind", list(KEYS))
def test_a_callers_own_retry_goes_on_with_the_kept_input(
    store: Store, scope: str, kind: str
) -> None:
    """The input kept with the key comes back as it was given (the key beside it is the
    store's business), to a retry by the caller as to the completer."""
    key = KEYS[kind]
    checkout = Checkout(scope, store)
    with pytest.raises(RuntimeError):
        checkout.resumable.run(key, {"id": 1})
    checkout.down = False
    assert checkout.resumable.run(key, {"id": 2})["email"] == "sent"
    assert checkout.inputs == [{"id": 1}, {"id": 1}]
    assert checkout.keys == [storable_key(key)] * 2  # begin's form: a long key is hashed


@pytest.mark.parametrize("backend", ["postgres"])
def test_an_input_kept_without_its_key_still_completes_with_the_stored_form(
    store: Store, scope: str, clock: FakeClock
) -> None:
    """A NUL key whose input was kept before the key was kept beside it (plain point 0, named
    "input"): the completer still finishes it; the function then has the stored form, the
    hash, as docs/steps-completer.md says."""
    key = KEYS["nul"]
    checkout = Checkout(scope, store)
    lock = begin(scope, key, store=store, lease_s=LEASE_S).lock
    assert lock is not None
    point = StepPoint(INPUT, "input", codec.dumps({"id": 1}), lock.fence, 0)
    assert store.record_step(lock.store_lock, point).ok
    clock.advance(LEASE_S + 1)
    checkout.down = False
    report = Completer([checkout.resumable], store=store).run(log=False)
    assert [o.outcome for o in report.outcomes] == ["completed"], report.outcomes
    assert checkout.keys == [hashed_key(key)]
    assert checkout.inputs == [{"id": 1}]
    record = store.get(scope, key)
    assert record is not None
    assert record.status is Status.COMPLETED
