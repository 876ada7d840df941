"""A holder without a heartbeat never inherits the `expected_by` of a heartbeat holder before it.

With a heartbeat, `claim` writes `expected_by` (the long lease's end) and the queue defers an
in-progress duplicate until then. A later holder whose lease is short enough to need no
heartbeat (a record processed late in a batch, a short function) wrote none, and both stores
keep an existing `expected_by` when none is given: the dead holder's then stood for the live
one's, hiding its duplicates (and its overdue state) for the dead holder's whole budget.
"""

from __future__ import annotations

import time
import uuid

from exactly_once.claims import ClaimStatus, claim
from exactly_once.stores.protocol import Store
from tests.waiting import wait_until

HEARTBEAT_MS = 1_000  # the dead holder's short lease: lapses within a second
LONG_MS = 600_000  # ... of a ten-minute budget
SHORT_MS = 20_000  # the next holder's lease: no heartbeat (a 30 s heartbeat lease is longer)


def test_a_takeover_without_a_heartbeat_sets_its_own_expected_by(store: Store, scope: str) -> None:
    k = f"k-{uuid.uuid4().hex[:8]}"
    dead = claim(store, scope, k, lease_ms=LONG_MS, owner="dead", heartbeat_ms=HEARTBEAT_MS)
    assert dead.acquired
    dead.lock.abandon()  # it dies: no more renewals, no outcome
    first = store.get(scope, k)
    assert first is not None
    assert first.lease_expires_at_ms is not None
    wait_until(
        lambda: time.time() * 1000 > (first.lease_expires_at_ms or 0) + 200,
        lambda: first.lease_expires_at_ms,
    )

    late = claim(store, scope, k, lease_ms=SHORT_MS, owner="late", heartbeat_ms=30_000)
    assert late.status is ClaimStatus.ACQUIRED
    assert late.takeover
    record = store.get(scope, k)
    assert record is not None
    assert record.lease_expires_at_ms is not None
    # The live holder's expected completion is its own lease's end, not the dead one's budget.
    assert record.expected_by_ms is not None
    assert record.expected_by_ms <= record.lease_expires_at_ms
    late.lock.succeed("done")
