"""Invoices: issues each invoice once, whether it came straight to the queue or through the
Billing topic (its SNS envelope is unwrapped). The total is worked out with `centsmath`, the
function's own vendored package."""

from typing import Any

# Vendored in this function's code folder (on its path when it runs); not on the repository
# mypy run's path.
import centsmath  # type: ignore[import-not-found]

from exactly_once import PermanentError, RecordContext, sqs_consumer
from exactly_once.ledger import append_effect


@sqs_consumer(key="invoiceId")
def consume(body: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
    try:
        cents = centsmath.to_cents(body.get("amount", 0))
    except ArithmeticError as exc:
        raise PermanentError(f"amount is no number: {body.get('amount')!r}") from exc
    if cents < 0:
        raise PermanentError(f"an invoice cannot be negative, got {cents} cents")
    total = centsmath.with_tax(cents)
    entry = append_effect(ctx, {"kind": "invoice", "totalCents": total}, name="invoice")
    return {"invoiceId": ctx.key, "totalCents": total, "entry": entry}
