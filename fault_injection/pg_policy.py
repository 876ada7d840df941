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

The draws alone cannot promise that each fault happens: a run of a few hundred messages sends
only tens of acquire statements, and at a 3 % rate none of them may lose its reply. So each
worker process also meets a few planned faults (`EACH_PROCESS`: the n-th statement of a kind,
counted in that process), as the crash and pause points are planned into message bodies: a
run whose rates are above zero always drops and loses both an acquire and a completion, and
CI's verdict that they happened no longer depends on the draw.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Mapping

from fault_injection.pg_faults import Decide

FAIL_KINDS = ("acquire", "write", "complete")
LOSE_KINDS = ("acquire", "write", "complete")
FAULTS = ("fail", "lose")

# kind -> {n: fault}: the fault the kind's n-th statement in a worker process meets. Spaced so
# that a retry (the next statement of its kind) meets the draw, not another planned fault.
EACH_PROCESS: Mapping[str, Mapping[int, str]] = {
    "acquire": {2: "fail", 5: "lose"},
    "complete": {3: "fail", 6: "lose"},
}


def random_faults(
    fail_rate: float,
    lose_rate: float,
    rng: random.Random,
    planned: Mapping[str, Mapping[int, str]] | None = None,
) -> Decide:
    """A `decide` for FaultyPool: one draw per statement, shared by the record threads.

    `planned` (e.g. EACH_PROCESS) forces a fault on the n-th statement of a kind, counted by
    this `decide`; a planned fault whose rate is zero is not forced (no rates, no faults).
    """
    if fail_rate + lose_rate > 1.0:
        raise ValueError("fail_rate + lose_rate cannot exceed 1: a statement meets one fault")
    lock = threading.Lock()  # Random and the counts are not safe to share between threads
    seen: Counter[str] = Counter()
    rates = {"fail": fail_rate, "lose": lose_rate}

    def decide(kind: str) -> str | None:
        fail = fail_rate if kind in FAIL_KINDS else 0.0
        lose = lose_rate if kind in LOSE_KINDS else 0.0
        if not fail and not lose:
            return None
        with lock:
            seen[kind] += 1
            forced = (planned or {}).get(kind, {}).get(seen[kind])
            draw = rng.random()
        if forced is not None and rates[forced]:
            return forced
        if draw < fail:
            return "fail"
        if draw < fail + lose:
            return "lose"
        return None

    return decide


def no_faults(kind: str) -> str | None:
    """The `decide` outside a chaos run."""
    return None
