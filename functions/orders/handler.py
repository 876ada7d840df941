"""Orders consumer (standard queue): records each order once in the ledger.

The body may carry `workMs` (simulated I/O time) and `failTimes` (raise a transient error on
the first N attempts) so demos and the fault-injection harness can exercise retries.
"""

from __future__ import annotations

import time
from typing import Any

from exactly_once import PermanentError, RecordContext, sqs_consumer
from exactly_once.ledger import append_effect


@sqs_consumer(key="orderId")
def handle(body: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
    amount = body.get("amount", 0)
    if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
        raise PermanentError(f"amount must be a non-negative number, got {amount!r}")
    if ctx.attempt <= int(body.get("failTimes", 0)):
        raise RuntimeError(f"simulated transient failure on attempt {ctx.attempt}")
    if work_ms := body.get("workMs"):
        time.sleep(float(work_ms) / 1000)
    # logged per execution, fenced: a zombie's write is refused, and a retry after a crash
    # does not write it again, so `make run` can count executions per key
    entry = append_effect(ctx, {"kind": "order", "amount": amount})
    return {"orderId": ctx.key, "fence": ctx.fence, "ledgerEntry": entry}
