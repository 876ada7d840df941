"""Refunds: pays each refund back once (scope `refunds-v2`, not the construct id)."""

from typing import Any

from exactly_once import PermanentError, RecordContext, sqs_consumer
from exactly_once.ledger import append_effect


@sqs_consumer(key="refundId")
def process(body: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
    amount = body.get("amount", 0)
    if isinstance(amount, bool) or not isinstance(amount, int | float) or amount <= 0:
        raise PermanentError(f"a refund needs a positive amount, got {amount!r}")
    entry = append_effect(ctx, {"kind": "refund", "amount": amount}, name="refund")
    return {"refundId": ctx.key, "entry": entry}
