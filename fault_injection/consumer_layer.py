"""The orders consumer on this layer, with its execution log fenced (the pattern) or not."""

from __future__ import annotations

from typing import Any

from exactly_once import RecordContext, sqs_consumer
from fault_injection.business import process_order
from fault_injection.effects import append_fenced, append_unfenced
from fault_injection.injection import receive_count


@sqs_consumer(key="orderId")
def handle_fenced(body: Any, ctx: RecordContext) -> dict[str, Any]:
    return process_order(
        body,
        ctx.key,
        receive_count(ctx.record),
        lambda amount: append_fenced(ctx, amount),
    )


@sqs_consumer(key="orderId")
def handle_unfenced(body: Any, ctx: RecordContext) -> dict[str, Any]:
    return process_order(
        body,
        ctx.key,
        receive_count(ctx.record),
        lambda amount: append_unfenced(
            ctx.key, ctx.fence, ctx.message_id, amount, ctx.attempt, ctx.scope
        ),
    )
