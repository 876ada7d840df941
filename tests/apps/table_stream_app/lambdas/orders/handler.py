"""Each order written to the Orders table takes effect once in the ledger, however often its
item is written again."""

from typing import Any

from exactly_once import RecordContext, stream_consumer
from exactly_once.ledger import append_effect


@stream_consumer(key="orderId")
def handle(payload: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
    return {"ledgerEntry": append_effect(ctx, {"kind": "order-change"})}
