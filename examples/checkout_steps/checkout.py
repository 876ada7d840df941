"""The checkout: one key per order, three steps inside it.

    charge  -> the payment provider, with the step's idempotency key (it deduplicates)
    ship    -> the shipment row, committed with the step's recovery point
    email   -> the confirmation, through a mailer that does not deduplicate

A holder that dies between two steps leaves the key IN_PROGRESS with the finished steps'
recovery points on its record. The next run of the same order takes the key over once the
lease ends, gets the finished steps' results back without running them, and runs the rest.
A step that raises fails the key as retryable (`once` records it), and the next run resumes
at that step at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from exactly_once import ClaimStatus, Store, once
from examples.checkout_steps.outside import Mailer, PaymentProvider
from examples.checkout_steps.shipments import Shipments


@dataclass(frozen=True)
class Order:
    order_id: str
    amount_cents: int
    email: str


class Outcome(StrEnum):
    DONE = "done"  # this run finished the order (resuming an earlier run's steps or not)
    ALREADY_DONE = "already_done"  # finished before: the stored receipt, nothing run
    BUSY = "busy"  # another run holds the order (or a crashed one's lease has not ended yet)
    NEEDS_A_PERSON = "needs_a_person"  # failed permanently (a StepOrderError, for one)


@dataclass
class Checkout:
    payments: PaymentProvider
    shipments: Shipments
    mailer: Mailer
    scope: str = "checkout"
    lease_s: float = 30.0  # more than the three steps take; a crashed run's successor waits it
    store: Store | None = None  # None: IDEMPOTENCY_TABLE or IDEMPOTENCY_DSN from the environment

    def run(self, order: Order) -> tuple[Outcome, Any]:
        """Check `order` out once; returns the outcome and the receipt (or what stopped it)."""
        with once(self.scope, order.order_id, lease_s=self.lease_s, store=self.store) as claim:
            if claim.acquired:
                lock = claim.lock
                charge_id = lock.step(
                    "charge",
                    lambda step: self.payments.charge(
                        order.order_id, order.amount_cents, idempotency_key=step.idempotency_key
                    ),
                )
                shipment_id = lock.step(
                    "ship", lambda step: self.shipments.create(step, order, charge_id)
                )
                message_id = lock.step(
                    "email",
                    lambda step: self.mailer.send(
                        order.email, f"Order {order.order_id} is on its way", shipment_id
                    ),
                )
                receipt = {"charge": charge_id, "shipment": shipment_id, "email": message_id}
                lock.succeed(receipt)
                return Outcome.DONE, receipt
        if claim.status is ClaimStatus.COMPLETED:
            return Outcome.ALREADY_DONE, claim.result
        if claim.status is ClaimStatus.IN_PROGRESS:
            return Outcome.BUSY, claim.lease_ends_at
        return Outcome.NEEDS_A_PERSON, claim.error
