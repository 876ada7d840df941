"""What a queue consumer's business function learns about the record it runs for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exactly_once.context import LockedContext
from exactly_once.sqs.messages import SqsMessage
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import Lock


@dataclass
class RecordContext(LockedContext):
    """An SQS record's: the message it came in."""

    message_id: str
    key: str
    fence: int
    attempt: int
    record: dict[str, Any]
    lambda_context: Any = None
    _store: Store | None = field(default=None, repr=False)
    _lock: Lock | None = field(default=None, repr=False)
    _message: SqsMessage | None = field(default=None, repr=False)

    @property
    def origin_id(self) -> str:
        return self.message_id

    @property
    def message(self) -> SqsMessage:
        """The record, typed: the one read at the entry (a context made by hand reads its own)."""
        if self._message is None:
            self._message = SqsMessage.from_record(self.record)
        return self._message
