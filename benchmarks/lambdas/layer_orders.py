"""An orders consumer on this layer, as deployed: configuration comes from the environment."""

from __future__ import annotations

from typing import Any

from exactly_once import RecordContext, sqs_consumer


@sqs_consumer(key="orderId")
def handler(body: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
    return {"orderId": body["orderId"], "accepted": True}
