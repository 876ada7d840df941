"""`python -m examples.checkout_steps ORDER_ID AMOUNT_CENTS EMAIL`: check one order out.

Settings from the environment:

- DynamoDB: `IDEMPOTENCY_TABLE` and `SHIPMENTS_TABLE` (with `AWS_ENDPOINT_URL_DYNAMODB` for
  DynamoDB Local);
- PostgreSQL: `IDEMPOTENCY_DSN` (run `eonce db migrate --dsn ...` once first) and
  `SHIPMENTS_SCHEMA` (default `shop`);
- `CHECKOUT_FOLDER`: where the fake payment provider and mailer keep their files;
- `CHECKOUT_SCOPE` (default `checkout`), `CHECKOUT_LEASE_S` (default 30).

Prints the outcome and the receipt as JSON. Exit status 0 when the order is checked out, 75
(EX_TEMPFAIL) when it is held by another run or a step failed (run it again: it resumes after
the last finished step), 1 when it needs a person (a step failed for good), 2 with its usage
for arguments or settings it cannot run with.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence

from exactly_once.errors import PermanentError
from examples.checkout_steps.checkout import Checkout, Order, Outcome
from examples.checkout_steps.outside import Mailer, PaymentProvider
from examples.checkout_steps.shipments import DynamoShipments, PostgresShipments, Shipments

TRY_AGAIN = 75


def from_env(env: Mapping[str, str]) -> Checkout:
    """The checkout the environment describes (see the module's docstring)."""
    folder = env["CHECKOUT_FOLDER"]
    shipments: Shipments
    if env.get("IDEMPOTENCY_DSN"):
        shipments = PostgresShipments(env.get("SHIPMENTS_SCHEMA", "shop"))
    else:
        shipments = DynamoShipments(env["SHIPMENTS_TABLE"])
    return Checkout(
        PaymentProvider(folder),
        shipments,
        Mailer(folder),
        scope=env.get("CHECKOUT_SCOPE", "checkout"),
        lease_s=float(env.get("CHECKOUT_LEASE_S", "30")),
    )


USAGE = "usage: python -m examples.checkout_steps ORDER_ID AMOUNT_CENTS EMAIL"
NEEDS_A_PERSON = 1
BAD_USAGE = 2


def main(argv: Sequence[str], checkout: Checkout) -> int:
    order_id, amount_cents, email = argv
    try:
        outcome, detail = checkout.run(Order(order_id, int(amount_cents), email))
    except PermanentError as error:  # the key is FAILED for good: run again, it stays so
        print(json.dumps({"outcome": "step_failed", "error": repr(error)}))
        return NEEDS_A_PERSON
    except Exception as error:  # a step failed: the key is FAILED and retryable
        print(json.dumps({"outcome": "step_failed", "error": repr(error)}))
        return TRY_AGAIN
    print(json.dumps({"outcome": outcome, "detail": detail}, default=str))
    if outcome in (Outcome.DONE, Outcome.ALREADY_DONE):
        return 0
    return TRY_AGAIN if outcome is Outcome.BUSY else 1


def cli(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """The command: its usage, one line on stderr and exit 2, for anything it cannot run."""
    if len(argv) != 3 or not argv[1].isdigit():
        print(USAGE, file=sys.stderr)
        return BAD_USAGE
    if "CHECKOUT_FOLDER" not in env:
        print("set CHECKOUT_FOLDER (see examples/checkout_steps/README.md)", file=sys.stderr)
        return BAD_USAGE
    return main(argv, from_env(env))


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:], os.environ))
