"""Orders from a Kinesis stream: records each order once in the ledger, in shard order.

The stream's twin of functions/orders: the record's data may carry `workMs` (simulated I/O
time) and `failTimes` (raise a transient error on the first N attempts), so demos, the local
poller and the fault-injection harness exercise retries; a negative or non-numeric amount is
permanent (the record goes to the DLQ with its reason and the shard moves on).
"""

from __future__ import annotations

import time
from typing import Any

from exactly_once import PermanentError, RecordContext, stream_consumer
from exactly_once.ledger import append_effect


@stream_consumer(key="orderId")
def handle(payload: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
    amount = payload.get("amount", 0)
    if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
        raise PermanentError(f"amount must be a non-negative number, got {amount!r}")
    if ctx.attempt <= int(payload.get("failTimes", 0)):
        raise RuntimeError(f"simulated transient failure on attempt {ctx.attempt}")
    if work_ms := payload.get("workMs"):
        time.sleep(float(work_ms) / 1000)
    # logged per execution, fenced: a zombie's write is refused, and a retry after a crash
    # does not write it again, so the local stack can count executions per key
    entry = append_effect(ctx, {"kind": "order-stream", "amount": amount})
    return {"orderId": ctx.key, "fence": ctx.fence, "ledgerEntry": entry}
