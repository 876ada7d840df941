"""Which PostgreSQL statements meet a fault in a chaos run: drawn at random, at the run's rates.

What the DynamoDB run does with throttles and lost replies, done at the driver's edge
(pg_faults.FaultyPool):

- "fail" (the connection drops before the statement is sent: nothing applied) hits the
  statements the store retries or settles itself: acquire, the fenced writes, and the
  completion that ends the holder's transaction (sent with its COMMIT), at the throttle rate;
- "lose" (applied, then the connection drops before the reply) hits the same statements at the
  lost-reply rate: the retry, or the reading that settles a commit, meets what its own first
  attempt did.

Reads and the business function's own statements are left alone: they are not the store's to
recover, and the run measures the store.
"""

from __future__ import annotations

import random
import threading

from fault_injection.pg_faults import Decide

FAIL_KINDS = ("acquire", "write", "complete")
LOSE_KINDS = ("acquire", "write", "complete")
FAULTS = ("fail", "lose")


def random_faults(fail_rate: float, lose_rate: float, rng: random.Random) -> Decide:
    """A `decide` for FaultyPool: one draw per statement, shared by the record threads."""
    if fail_rate + lose_rate > 1.0:
        raise ValueError("fail_rate + lose_rate cannot exceed 1: a statement meets one fault")
    lock = threading.Lock()  # Random is not safe to share between the record threads

    def decide(kind: str) -> str | None:
        fail = fail_rate if kind in FAIL_KINDS else 0.0
        lose = lose_rate if kind in LOSE_KINDS else 0.0
        if not fail and not lose:
            return None
        with lock:
            draw = rng.random()
        if draw < fail:
            return "fail"
        if draw < fail + lose:
            return "lose"
        return None

    return decide


def no_faults(kind: str) -> str | None:
    """The `decide` outside a chaos run."""
    return None
