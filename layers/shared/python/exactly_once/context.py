"""`RecordContext` on its own: effects and the ledger take one, the processor makes one, and
none of them has to import another for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exactly_once.messages import SqsMessage
from exactly_once.records import Lock
from exactly_once.store import IdempotencyStore


@dataclass
class RecordContext:
    """What the business function learns about the record it runs for."""

    message_id: str
    key: str
    fence: int  # strictly increases per key across holders: pass it downstream as a fence
    attempt: int
    record: dict[str, Any]
    lambda_context: Any = None
    _store: IdempotencyStore | None = field(default=None, repr=False)
    _lock: Lock | None = field(default=None, repr=False)
    _message: SqsMessage | None = field(default=None, repr=False)

    @property
    def message(self) -> SqsMessage:
        """The record, typed: the one read at the entry (a context made by hand reads its own)."""
        if self._message is None:
            self._message = SqsMessage.from_record(self.record)
        return self._message

    @property
    def scope(self) -> str:
        """The consumer's key space (the record id is "{scope}#{key}")."""
        if self._lock is None:
            return ""
        return self._lock.record_id[: -len(self.key) - 1] if self.key else self._lock.record_id

    def extend_lease(self, lease_ms: int) -> bool:
        """Renew the lock for work that outlives its lease; False means it was lost."""
        if self._store is None or self._lock is None:
            return False
        result = self._store.extend(self._lock, lease_ms)
        if result.ok and result.lock is not None:
            self._lock = result.lock
        return result.ok
