"""Sales counter, subscribed directly to the Sales topic: counts each sale once in the ledger.

The AWS shop example's bug was a sale counted twice when SNS delivered its message twice; here
the key is the sale's orderId, so a second delivery, and a second publish of the same sale,
are both suppressed. Like the orders consumer, a message may carry `failTimes` (raise a
transient error on the first N attempts) and `workMs` (simulated I/O) for demos and tests.
"""

from __future__ import annotations

import time
from typing import Any

from exactly_once import NotificationContext, PermanentError, sns_subscriber
from exactly_once.ledger import append_effect


@sns_subscriber(key="orderId")
def handle(message: dict[str, Any], ctx: NotificationContext) -> dict[str, Any]:
    amount = message.get("amount", 0)
    if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
        raise PermanentError(f"amount must be a non-negative number, got {amount!r}")
    if ctx.attempt <= int(message.get("failTimes", 0)):
        raise RuntimeError(f"simulated transient failure on attempt {ctx.attempt}")
    if work_ms := message.get("workMs"):
        time.sleep(float(work_ms) / 1000)
    # logged per execution, fenced: a zombie's write is refused, and a retry after a crash
    # does not write it again, so `make run` can count executions per key
    entry = append_effect(ctx, {"kind": "sale", "amount": amount})
    return {"orderId": ctx.key, "fence": ctx.fence, "ledgerEntry": entry}
