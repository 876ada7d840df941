"""Reading an OrderCreated event from a Kafka record's value, refusing what cannot be an order.

Its own module because the refusals are the job: a producer's bytes are untrusted, and every
way they can be wrong must end as a named reason (the record is then kept as a dead letter and
its offset moves on), never as an exception that stops the partition for good. In particular
valid JSON can still break the service: a lone surrogate (`"\\ud800"`) cannot be written to
PostgreSQL, `[[[[…` overflows the parser, and an integer of thousands of digits is refused by
Python's own limit or overflows a `bigint`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from exactly_once.stores.codec import fingerprint

MAX_VALUE_BYTES = 64 * 1024  # an OrderCreated event is small; anything larger is not one
MAX_AMOUNT_CENTS = 10**12  # within a PostgreSQL bigint, and beyond any real order
MAX_TEXT_CHARS = 256


class NotAnOrder(ValueError):
    """The record's value is not a usable OrderCreated event; the message says why."""


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    amount_cents: int

    @property
    def fingerprint(self) -> str:
        """The same order id with other content is a MISMATCH for `once`, never written."""
        return fingerprint(
            {"orderId": self.order_id, "customer": self.customer, "amount": self.amount_cents}
        )


def read_order(value: bytes | None) -> Order:
    """The order in `value`, or NotAnOrder with the reason."""
    if value is None:
        raise NotAnOrder("the record has no value (a tombstone)")
    if len(value) > MAX_VALUE_BYTES:
        raise NotAnOrder(f"the value is {len(value)} bytes, over {MAX_VALUE_BYTES}")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotAnOrder(f"the value is not UTF-8: {exc}") from exc
    try:
        event = json.loads(text)
    except RecursionError as exc:  # "[[[[…": poison, not a crash
        raise NotAnOrder("the value is JSON nested too deeply to parse") from exc
    except ValueError as exc:  # not JSON, or an integer over Python's 4300-digit limit
        raise NotAnOrder(f"the value is not JSON: {_printable(str(exc))}") from exc
    if not isinstance(event, dict) or event.get("type", "OrderCreated") != "OrderCreated":
        raise NotAnOrder("the value is not an OrderCreated event")
    return Order(
        order_id=_text(event, "orderId"),
        customer=_text(event, "customer"),
        amount_cents=_amount(event.get("amountCents")),
    )


def _text(event: dict[str, Any], field: str) -> str:
    value = event.get(field)
    if not isinstance(value, str) or not value:
        raise NotAnOrder(f"{field} is missing or not a non-empty string")
    if len(value) > MAX_TEXT_CHARS:
        raise NotAnOrder(f"{field} is longer than {MAX_TEXT_CHARS} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # valid JSON, but PostgreSQL text cannot hold it
        raise NotAnOrder(f"{field} is not valid Unicode text (a lone surrogate)") from exc
    if "\x00" in value:  # PostgreSQL text cannot hold a NUL either
        raise NotAnOrder(f"{field} contains a NUL character")
    return value


def _amount(value: Any) -> int:
    # bool is an int in Python; 1e3 is a float: neither is an amount in cents.
    if not isinstance(value, int) or isinstance(value, bool):
        raise NotAnOrder("amountCents is missing or not an integer")
    if not 0 < value < MAX_AMOUNT_CENTS:
        raise NotAnOrder(f"amountCents is out of range (1 to {MAX_AMOUNT_CENTS - 1})")
    return value


def _printable(text: str) -> str:
    """A reason as storable text, whatever the parser quoted from the input."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
