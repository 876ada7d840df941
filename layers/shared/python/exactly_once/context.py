"""What a business function learns about the work it runs for, per entry point.

Fenced effects (effects.py) and the ledger need only the lock, the key and where the work came
from, so they take a `LockedContext`; each entry point's context adds its own fields.
`RecordContext` lives here on its own so that effects, the ledger and the processor need not
import each other for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from exactly_once import heartbeat
from exactly_once.messages import SqsMessage
from exactly_once.records import Lock
from exactly_once.stores import Store

if TYPE_CHECKING:  # the queue path never loads the HTTP modules
    from exactly_once.http_request import HttpRequest


class LockedContext(ABC):
    """The lock one execution holds on a record: its key, fence and attempt."""

    key: str
    fence: int  # strictly increases per key across holders: pass it downstream as a fence
    attempt: int
    _store: Store | None
    _lock: Lock | None

    @property
    @abstractmethod
    def origin_id(self) -> str:
        """What started the work (a message id, a request id): written beside its effects."""

    @property
    def scope(self) -> str:
        """The entry point's key space (the record id is "{scope}#{key}")."""
        if self._lock is None:
            return ""
        if self._lock.scope:
            return self._lock.scope
        return self._lock.record_id[: -len(self.key) - 1] if self.key else self._lock.record_id

    @property
    def transaction(self) -> Any:
        """The open `psycopg.Connection` whose transaction commits with this key's COMPLETED
        record (PostgreSQL store only): business writes made on it happen exactly when the
        work is recorded done, and roll back when this holder lost its lease. Keep slow calls
        to other systems out of it (see README, "Choosing a store")."""
        if self._store is None or self._lock is None:
            raise RuntimeError("this context holds no lock")
        return self._store.transaction(self._lock)

    def extend_lease(self, lease_ms: int) -> bool:
        """Renew the lock for work that outlives its lease; False means it was lost."""
        if self._store is None or self._lock is None:
            return False
        result = self._store.extend(self._lock, lease_ms)
        if result.ok and result.lock is not None:
            self._lock = result.lock
            heartbeat.reach(result.lock, lease_ms / 1000)  # renewals honour it (heartbeat.py)
        return result.ok


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


@dataclass
class NotificationContext(RecordContext):
    """An SNS notification's, for a Lambda subscribed to a topic: `message_id` is the SNS
    MessageId, `record` the event's record, and the topic's fields are at hand."""

    @property
    def sns(self) -> dict[str, Any]:
        sns = self.record.get("Sns") if isinstance(self.record, dict) else None
        return sns if isinstance(sns, dict) else {}

    @property
    def topic_arn(self) -> str | None:
        return _text(self.sns.get("TopicArn"))

    @property
    def subject(self) -> str | None:
        return _text(self.sns.get("Subject"))

    @property
    def published_at(self) -> str | None:
        """SNS's Timestamp (ISO 8601): when the message was published."""
        return _text(self.sns.get("Timestamp"))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class RequestContext(LockedContext):
    """An HTTP request's. `key` is the record's key (the caller and the Idempotency-Key
    together), so effects keyed by it are per caller too."""

    request_id: str
    key: str
    fence: int
    attempt: int
    idempotency_key: str
    caller: str
    request: HttpRequest
    lambda_context: Any = None
    _store: Store | None = field(default=None, repr=False)
    _lock: Lock | None = field(default=None, repr=False)

    @property
    def origin_id(self) -> str:
        return self.request_id
