"""The workflow: a Lambda durable function that charges, ships and emails, each once per order.

Started by the dispatcher (one execution per order, by name), it takes the order's key with
`once(..., lambda_context=context)`: the lock carries the execution's ARN, so the execution's
own replays resume it (new token, new fence) and any other execution for the same order finds
it held, or done. The three steps are `lock.step`s (recovery points on the order's record,
fenced on the lock), with a durable wait between them that suspends the invocation inside the
block:

- a replay runs the handler from the start; each finished step returns its recovery point's
  result without calling its provider, and the SDK answers each finished wait from its log;
- a new execution for the same order (an event source mapping's retry, a redrive under another
  name) has none of the SDK's checkpoints, and is answered the same way by the recovery points,
  or by the completed key;
- a step that failed before its recovery point (the provider's reply lost, the invocation
  killed) runs again with the same idempotency key, so the provider deduplicates what the
  failed attempt did.

The steps are called directly, not wrapped in the SDK's `context.step` (which also works: a
durable lock's call passes over the recovery points of steps a replay skipped; see
docs/steps-durable.md). The `lock.step` is this workflow's checkpoint; the SDK keeps the waits.

A step that raises ends the block: the key is recorded FAILED (retryable unless the error is a
PermanentError) with the steps finished so far, and the execution fails. The next execution for
the order resumes after those steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration

from exactly_once import once
from exactly_once.stores.codec import fingerprint
from examples.durable_orders.providers import LoggingProviders, Providers
from examples.durable_orders.settings import LEASE_S, SCOPE, WAIT_S

if TYPE_CHECKING:
    from exactly_once.stores.protocol import Store


def make_handler(
    providers: Providers,
    *,
    store: Store | None = None,
    wait_s: int = WAIT_S,
    lease_s: float = LEASE_S,
) -> Callable[[Any, Any], Any]:
    """The durable handler over `providers` (the store from IDEMPOTENCY_TABLE or
    IDEMPOTENCY_DSN unless given)."""

    @durable_execution
    def handler(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
        order: dict[str, Any] = event["order"]
        order_id = order["order_id"]
        with once(
            SCOPE,
            order_id,
            lambda_context=context,
            lease_s=lease_s,
            fingerprint=fingerprint(order),
            store=store,
        ) as claim:
            if not claim.acquired:
                # COMPLETED: an earlier execution did it all (its result is here); IN_PROGRESS:
                # another execution holds the order; MISMATCH: another order under this id;
                # FAILED: a person must look. Nothing runs again.
                return {"order_id": order_id, "status": str(claim.status), "result": claim.result}
            lock = claim.lock
            charge = lock.step("charge", lambda s: providers.charge(order, s.idempotency_key))
            context.wait(Duration.from_seconds(wait_s), name="after-charge")
            shipment = lock.step("ship", lambda s: providers.ship(order, charge, s.idempotency_key))
            context.wait(Duration.from_seconds(wait_s), name="after-ship")
            email = lock.step(
                "email", lambda s: providers.email(order, shipment, s.idempotency_key)
            )
            result = {"charge": charge, "shipment": shipment, "email": email}
            lock.succeed(result)
        return {"order_id": order_id, "status": "completed", "result": result}

    return handler


handler = make_handler(LoggingProviders())
"""The Lambda entry point (a function with DurableConfig), on the store the environment names."""
