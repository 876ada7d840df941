"""Providers for the durable orders tests: they deduplicate on the idempotency key as a payment
API does (a repeated key gets the first call's answer and acts no more), and count what they
did, so a test can tell a step that ran twice from one whose provider acted twice."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any


class ProviderDown(Exception):
    """The provider could not be reached (a transient failure the SDK's step retries)."""


class RecordingProviders:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (what, order_id, idempotency key), all
        self.effects: Counter[tuple[str, str]] = Counter()  # (what, order_id): acted
        self._answers: dict[str, dict[str, Any]] = {}
        self.lose_reply_once: set[str] = set()  # acts, then the reply is lost (once each)
        self.down: set[str] = set()  # fails every call, acting on none
        self._lock = threading.Lock()

    def _call(self, what: str, order: dict[str, Any], key: str) -> dict[str, Any]:
        order_id = order["order_id"]
        with self._lock:
            self.calls.append((what, order_id, key))
            if what in self.down:
                raise ProviderDown(f"{what} is down")
            answer = self._answers.get(key)
            if answer is None:  # a new key: the provider acts
                self.effects[(what, order_id)] += 1
                answer = self._answers[key] = {f"{what}_id": f"{what}-{len(self._answers)}"}
            if what in self.lose_reply_once:
                self.lose_reply_once.discard(what)
                raise ProviderDown(f"{what} acted, but its reply was lost")
            return answer

    def charge(self, order: dict[str, Any], idempotency_key: str) -> dict[str, Any]:
        return self._call("charge", order, idempotency_key)

    def ship(
        self, order: dict[str, Any], charge: dict[str, Any], idempotency_key: str
    ) -> dict[str, Any]:
        return self._call("ship", order, idempotency_key)

    def email(
        self, order: dict[str, Any], shipment: dict[str, Any], idempotency_key: str
    ) -> dict[str, Any]:
        return self._call("email", order, idempotency_key)

    def keys(self, what: str) -> list[str]:
        return [key for called, _, key in self.calls if called == what]
