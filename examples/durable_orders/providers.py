"""The outside world the workflow's steps call: a payment API, a carrier, an email service.

Each call carries the step's idempotency key (`step.idempotency_key`, the same for every
holder of the order's record generation). A provider that deduplicates on it (Stripe's
Idempotency-Key, most payment and email APIs) answers a repeated call with the first call's
result, which is what makes the one unavoidable repeat safe: a holder that died after the
provider acted and before the step's recovery point was written is followed by one that calls
again with the same key. A provider that does not deduplicate may act twice in that window.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Providers(Protocol):
    """The three calls of an order's workflow; each returns what the step keeps as its result
    (JSON-encodable, within the store's result cap)."""

    def charge(self, order: dict[str, Any], idempotency_key: str) -> dict[str, Any]: ...

    def ship(
        self, order: dict[str, Any], charge: dict[str, Any], idempotency_key: str
    ) -> dict[str, Any]: ...

    def email(
        self, order: dict[str, Any], shipment: dict[str, Any], idempotency_key: str
    ) -> dict[str, Any]: ...


class LoggingProviders:
    """Stand-ins that log what a real client would send: replace them with your providers'
    clients, passing `idempotency_key` as each provider's idempotency header."""

    def charge(self, order: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
        log.info("charge", extra={"order_id": order["order_id"], "key": idempotency_key})
        return {"charge_id": f"ch_{idempotency_key[-12:]}"}

    def ship(
        self, order: dict[str, Any], charge: dict[str, Any], idempotency_key: str
    ) -> dict[str, Any]:
        log.info("ship", extra={"order_id": order["order_id"], "key": idempotency_key})
        return {"shipment_id": f"sh_{idempotency_key[-12:]}"}

    def email(
        self, order: dict[str, Any], shipment: dict[str, Any], idempotency_key: str
    ) -> dict[str, Any]:
        log.info("email", extra={"order_id": order["order_id"], "key": idempotency_key})
        return {"message_id": f"em_{idempotency_key[-12:]}"}
