"""The outside world of the checkout, faked in files so that several processes (one of them
killed on purpose) see the same provider and the same outbox.

- `PaymentProvider` deduplicates by idempotency key, as Stripe and most payment APIs do: a
  second call with a key it has seen returns the first call's charge and charges nothing.
- `Mailer` does not deduplicate, as a plain SMTP relay does not: every call sends a message.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class PaymentProvider:
    """A payment API that answers a repeated idempotency key with the charge it made for it."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.calls = self.folder / "payment_calls.jsonl"  # every request received
        self.charges = self.folder / "charges.jsonl"  # every charge actually made

    def charge(self, order_id: str, amount_cents: int, *, idempotency_key: str) -> str:
        """Charge once per idempotency key; returns the charge's id."""
        with _locked(self.folder / "payments.lock"):
            _append(self.calls, {"order_id": order_id, "idempotency_key": idempotency_key})
            for charge in read_lines(self.charges):
                if charge["idempotency_key"] == idempotency_key:
                    return str(charge["id"])  # a retry of a request already served
            charge_id = f"ch_{len(read_lines(self.charges)) + 1}"
            _append(
                self.charges,
                {
                    "id": charge_id,
                    "order_id": order_id,
                    "amount_cents": amount_cents,
                    "idempotency_key": idempotency_key,
                },
            )
            return charge_id


class Mailer:
    """An email service without deduplication: each call sends one more message."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.outbox = self.folder / "outbox.jsonl"

    def send(self, to: str, subject: str, body: str) -> str:
        with _locked(self.folder / "outbox.lock"):
            message_id = f"msg_{len(read_lines(self.outbox)) + 1}"
            _append(self.outbox, {"id": message_id, "to": to, "subject": subject, "body": body})
        return message_id


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of `path` (none when it does not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _append(path: Path, entry: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(entry) + "\n")
        file.flush()
        os.fsync(file.fileno())  # written before the call returns, as a real provider's is


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
