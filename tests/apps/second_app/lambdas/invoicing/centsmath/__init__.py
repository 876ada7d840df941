"""A tiny vendored dependency of the Invoices function: it lives in that function's own code
folder, so it is on that function's path only (as a package pip-installed into the folder
would be)."""

from decimal import ROUND_HALF_UP, Decimal

TAX_RATE = Decimal("0.20")


def to_cents(amount: object) -> int:
    """A money amount (number or text) as whole cents, rounded half up."""
    value = Decimal(str(amount)) * 100
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def with_tax(cents: int) -> int:
    return cents + int((Decimal(cents) * TAX_RATE).quantize(Decimal(1), rounding=ROUND_HALF_UP))
