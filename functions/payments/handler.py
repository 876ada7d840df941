"""Payments consumer (FIFO queue, one message group per account): each payment once, in order.

A payment must never be repeated, so an expired lock is not taken over: it becomes a FAILED
record and goes to the DLQ for a person to check (`block_takeover=True`).
"""

from __future__ import annotations

import time
from decimal import Decimal, InvalidOperation
from typing import Any

from exactly_once import PermanentError, RecordContext, sqs_consumer
from exactly_once.ledger import append_effect


@sqs_consumer(key="paymentId", block_takeover=True)
def handle(body: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
    account = body.get("accountId")
    if not isinstance(account, str) or not account:
        raise PermanentError("payment has no accountId")
    try:
        amount = Decimal(str(body.get("amount")))
    except InvalidOperation as exc:
        raise PermanentError(f"amount is not a number: {body.get('amount')!r}") from exc
    if not amount.is_finite() or amount <= 0:
        raise PermanentError(f"amount must be positive, got {amount}")
    if ctx.attempt <= int(body.get("failTimes", 0)):
        raise RuntimeError(f"simulated transient failure on attempt {ctx.attempt}")
    if work_ms := body.get("workMs"):
        time.sleep(float(work_ms) / 1000)
    entry = append_effect(ctx, {"kind": "payment", "account": account, "amount": str(amount)})
    return {"paymentId": ctx.key, "account": account, "amount": amount, "ledgerEntry": entry}
