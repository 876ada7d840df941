"""What an HTTP API's business function learns about the request it runs for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exactly_once.context import LockedContext
from exactly_once.http.request import HttpRequest
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import Lock


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
