"""The three-step consumers on DynamoDB: the layer with `ctx.step` (the pattern), and the same
three effects without steps (the comparison).

Both run the orders business function (validation, transient failures, the work) with the
three steps as its effect, and meet the same planned crashes and pauses between and inside
the steps. In a chaos run (STEPS_LOST_REPLY_ENV set by the harness) a share of the worker's
TransactWriteItems replies are lost after DynamoDB applied them (lost_replies), so botocore
retries a step's write that already committed: the store must recognise its own point.
"""

from __future__ import annotations

import os
import random
from typing import Any

from exactly_once import RecordContext, clients, sqs_consumer
from fault_injection import events
from fault_injection.business import process_order
from fault_injection.injection import receive_count
from fault_injection.lost_replies import install_lost_replies
from fault_injection.settings import STEPS_LOST_REPLY_ENV
from fault_injection.steps_effects import at_points, fenced_steps, plain_steps

LOST_OPERATIONS = ("TransactWriteItems",)  # a step's point with its entry


def install_step_lost_replies(rate: float, seed: str) -> None:
    """Lose `rate` of this process's TransactWriteItems replies (each an applied write)."""
    if rate <= 0:
        return
    rng = random.Random(seed)
    install_lost_replies(
        clients.dynamodb(),
        lambda operation: operation in LOST_OPERATIONS and rng.random() < rate,
        lambda operation: events.record("lost-reply", op=operation),
    )


install_step_lost_replies(
    float(os.environ.get(STEPS_LOST_REPLY_ENV) or 0), f"{os.getpid()}/{os.urandom(4).hex()}"
)


@sqs_consumer(key="orderId")
def handle_steps(body: Any, ctx: RecordContext) -> dict[str, Any]:
    at = at_points(body, ctx.key, receive_count(ctx.record))
    return process_order(
        body, ctx.key, receive_count(ctx.record), lambda amount: fenced_steps(ctx, amount, at)
    )


@sqs_consumer(key="orderId")
def handle_plain(body: Any, ctx: RecordContext) -> dict[str, Any]:
    at = at_points(body, ctx.key, receive_count(ctx.record))
    return process_order(
        body, ctx.key, receive_count(ctx.record), lambda amount: plain_steps(ctx, amount, at)
    )
