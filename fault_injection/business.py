"""The orders business function every consumer under test runs, with its fault points.

Same rules as functions/orders/handler.py (a negative or non-numeric amount is permanent,
`workMs` simulates I/O, `failTimes` fails early deliveries), plus the planned crash and pause
points around the effect. The effect is passed in, so the consumers differ only in how they
write it and in the idempotency library around it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from exactly_once import PermanentError
from fault_injection import injection

Effect = Callable[[Any], dict[str, Any]]  # amount -> result


def process_order(body: Any, key: str, receive_count: int, effect: Effect) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise PermanentError(f"an order must be a JSON object, got {type(body).__name__}")
    amount = body.get("amount", 0)
    if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
        raise PermanentError(f"amount must be a non-negative number, got {amount!r}")
    injection.maybe_fail(body, key, receive_count)
    injection.at_point(body, injection.BEFORE_EFFECT, key, receive_count)
    work_ms = body.get("workMs")
    if isinstance(work_ms, int | float) and work_ms > 0:
        time.sleep(float(work_ms) / 1000)
    result = effect(amount)
    injection.at_point(body, injection.AFTER_EFFECT, key, receive_count)
    return result
