"""The checkout example run as a process that dies on purpose, at a planned point.

`python -m tests.examples.checkout_service ORDER_ID AMOUNT_CENTS EMAIL` reads the example's
settings from the environment (examples/checkout_steps/__main__.py) plus CRASH_AT, and ends
the process with `os._exit` there: no `finally`, no `with` exit, no rollback, as a kill
would. The key stays IN_PROGRESS with the recovery points written before the crash.

CRASH_AT names where, in the order of the checkout:

- `inside_charge`: the provider has charged; the step's recovery point is not written;
- `before_ship`: between the charge and the shipment;
- `inside_ship`: the shipment row is written in the step's transaction (PostgreSQL) or added
  to its writes (DynamoDB), and neither is committed;
- `before_email`: between the shipment and the email;
- `inside_email`: the email is sent; the step's recovery point is not written (the limit the
  documentation names: a mailer that does not deduplicate sends it again).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from examples.checkout_steps.__main__ import from_env, main
from examples.checkout_steps.checkout import Checkout
from examples.checkout_steps.outside import Mailer, PaymentProvider
from examples.checkout_steps.shipments import Shipments

if TYPE_CHECKING:
    from exactly_once.steps.step import Step
    from examples.checkout_steps.checkout import Order

CRASHED = 70  # the exit status of a planned crash
CRASH_POINTS = ("inside_charge", "before_ship", "inside_ship", "before_email", "inside_email")


def crash() -> None:
    sys.stdout.flush()
    os._exit(CRASHED)


class CrashingProvider(PaymentProvider):
    def charge(self, order_id: str, amount_cents: int, *, idempotency_key: str) -> str:
        super().charge(order_id, amount_cents, idempotency_key=idempotency_key)
        crash()
        raise AssertionError("unreachable")


class CrashingShipments:
    def __init__(self, shipments: Shipments, *, before: bool) -> None:
        self.shipments, self.before = shipments, before

    def create(self, step: Step, order: Order, charge_id: str) -> str:
        if not self.before:
            self.shipments.create(step, order, charge_id)
        crash()
        raise AssertionError("unreachable")


class CrashingMailer(Mailer):
    def __init__(self, folder: str, *, before: bool) -> None:
        super().__init__(folder)
        self.before = before

    def send(self, to: str, subject: str, body: str) -> str:
        if not self.before:
            super().send(to, subject, body)
        crash()
        raise AssertionError("unreachable")


def crashing(checkout: Checkout, crash_at: str, folder: str) -> Checkout:
    """`checkout` with the part that dies at `crash_at` swapped in."""
    if crash_at == "inside_charge":
        checkout.payments = CrashingProvider(folder)
    elif crash_at in ("before_ship", "inside_ship"):
        checkout.shipments = CrashingShipments(checkout.shipments, before=crash_at == "before_ship")
    elif crash_at in ("before_email", "inside_email"):
        checkout.mailer = CrashingMailer(folder, before=crash_at == "before_email")
    else:
        raise ValueError(f"CRASH_AT is one of {CRASH_POINTS}, got {crash_at!r}")
    return checkout


if __name__ == "__main__":
    env = dict(os.environ)
    sys.exit(
        main(
            sys.argv[1:],
            crashing(from_env(env), env["CRASH_AT"], env["CHECKOUT_FOLDER"]),
        )
    )
