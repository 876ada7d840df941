"""Waiting out another holder of a stream record's key, within the invocation's time.

A queue message held elsewhere is hidden until the holder's lease ends (reports.py). A stream
record cannot be hidden, its shard waits on it anyway, and the mapping retries at once: without
a wait, each retry would spend one of the mapping's attempts on the same IN_PROGRESS answer.
So the record waits here, reading the key's record now and then, and is claimed again as soon
as the holder is gone: it completed (the record is then a duplicate), failed or released it,
or died (its lease passed unrenewed, so this invocation takes the key over).

A holder that renews its lease is alive and working: the wait ends there, and the record is
answered in progress. Waiting on a live holder could stall two invocations that hold each
other's keys (a wave's gathered completions are written when the wave ends), each until the
other's lease ran out.
"""

from __future__ import annotations

import time

from exactly_once.stores.protocol import Store
from exactly_once.stores.records import StoredRecord
from exactly_once.stores.schema import Status

POLL_MS = 1_000  # one read of the key's record a second while waiting
SLACK_MS = 250  # past a lease's end by this much, a takeover does not race the clock


def holder_gone(
    store: Store, scope: str, key: str, holder: StoredRecord | None, budget_ms: float
) -> bool:
    """True once the key is worth claiming again (its holder completed, failed, released it,
    or let its lease pass unrenewed); False when the holder renewed its lease, or when it
    would outlast `budget_ms`, the time before the invocation must stop starting work."""
    if holder is None or holder.lease_expires_at_ms is None:
        return False
    lease_end = holder.lease_expires_at_ms
    start = time.monotonic()
    while True:
        until_end = lease_end + SLACK_MS - time.time() * 1000
        if until_end <= 0:
            return True
        waited = (time.monotonic() - start) * 1000
        if waited + min(until_end, POLL_MS) > budget_ms:
            return False
        time.sleep(min(until_end, POLL_MS) / 1000)
        record = store.get(scope, key)
        if record is None or record.status is not Status.IN_PROGRESS:
            return True
        if record.lease_expires_at_ms != lease_end:  # renewed, or another holder took it
            return False
