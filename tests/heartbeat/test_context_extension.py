"""A holder that extends its lease through its context keeps the key that long, heartbeat or not.

The entry points hand the business function a context (RecordContext, NotificationContext,
RequestContext) whose `extend_lease` writes the store's fenced extend directly, and `OnceLock`
inherits it. With a heartbeat, the beat knew nothing of it: its next renewal cut the extension
back to a heartbeat lease, and its renewals stopped at the budget the lock was taken with, so a
live holder that had asked for more time lost its key there and was taken over while it ran.
Now the extension reaches the beat, as `OnceLock.extend` always did. On the real clock (this
directory's stores): a takeover can only be seen by time passing.
"""

from __future__ import annotations

import uuid

import pytest

from exactly_once.claims import Claim, ClaimStatus, claim
from exactly_once.context import LockedContext
from exactly_once.sqs.context import RecordContext
from exactly_once.stores.protocol import Store
from tests.waiting import wait_until

BUDGET_MS = 3_000  # the lease the lock is taken with
HEARTBEAT_MS = 1_500  # held as this, renewed every 0.5 s
EXTENDED_MS = 60_000  # what the holder asks for once it knows it needs longer


def holder_context(store: Store, held: Claim, which: str) -> LockedContext:
    if which == "record context":  # what the queue and topic entry points give the function
        return RecordContext(
            "m-1", held.key, held.lock.fence, 1, {}, None, store, held.lock.store_lock
        )
    return held.lock  # a once's lock is a LockedContext too


@pytest.mark.parametrize("which", ["record context", "once lock"])
def test_an_extension_through_the_context_keeps_the_key_past_the_first_budget(
    store: Store, scope: str, which: str
) -> None:
    key = f"k-{uuid.uuid4().hex[:8]}"
    held = claim(store, scope, key, lease_ms=BUDGET_MS, owner="holder", heartbeat_ms=HEARTBEAT_MS)
    assert held.acquired
    budget_end = held.lock.store_lock.lease_expires_at_ms - HEARTBEAT_MS + BUDGET_MS
    assert holder_context(store, held, which).extend_lease(EXTENDED_MS)

    # Wait for a renewal written after the first budget had ended: only renewals that honour
    # the extension write one. Observed, not timed: a loaded machine only makes it slower.
    token = held.lock.store_lock.token

    def renewed_past_budget() -> bool:
        current = store.get(scope, key)
        return (
            current is not None
            and current.lock_token == token
            and (current.updated_at_ms or 0) > budget_end
        )

    wait_until(renewed_past_budget, lambda: store.get(scope, key))
    rival = claim(store, scope, key, lease_ms=30_000, owner="rival")
    assert rival.status is ClaimStatus.IN_PROGRESS, "a live holder's extended key was taken over"
    assert not held.lock.heartbeat_lost
    held.lock.succeed("done")
