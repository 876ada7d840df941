"""Recording completion durably: the work has happened, so losing the write would let a later
takeover run it again. Retried past botocore's own retries, but bounded, and only while the
invocation has time left (a local script without a Lambda context cannot spin forever)."""

from __future__ import annotations

import time
from typing import Any

from exactly_once.lease import remaining_ms
from exactly_once.records import Lock, WriteResult
from exactly_once.store import IdempotencyStore

COMPLETE_ATTEMPTS = 4  # each is botocore's own retries


def complete_durably(
    store: IdempotencyStore, lock: Lock, result: Any, context: Any, reserve_ms: float
) -> WriteResult:
    """`store.complete`, tried up to COMPLETE_ATTEMPTS times while more than `reserve_ms` plus
    the next back-off is left; the last error is raised when it never got through."""
    delay = 0.1
    for attempt in range(1, COMPLETE_ATTEMPTS + 1):
        try:
            return store.complete(lock, result)
        except Exception:
            if attempt == COMPLETE_ATTEMPTS or remaining_ms(context) < reserve_ms + delay * 1000:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")  # the loop returns or raises
