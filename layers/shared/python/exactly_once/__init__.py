"""Exactly-once processing on AWS Lambda: a fenced DynamoDB idempotency store behind SQS
consumers and HTTP APIs.

The HTTP names (`idempotent_api`, `HttpRequest`, ...) load on first use, so a queue consumer's
cold start never imports them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from exactly_once.consumer import SqsConsumer, sqs_consumer
from exactly_once.context import LockedContext, RecordContext, RequestContext
from exactly_once.errors import ConfigurationError, PermanentError
from exactly_once.lease import LeasePolicy
from exactly_once.messages import SqsMessage
from exactly_once.outcomes import Outcome, RecordResult
from exactly_once.records import (
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Lock,
    StoredRecord,
    WriteResult,
    WriteStatus,
)
from exactly_once.schema import Status
from exactly_once.store import IdempotencyStore

if TYPE_CHECKING:
    from exactly_once.http_api import ApiOutcome as ApiOutcome
    from exactly_once.http_api import IdempotentApi as IdempotentApi
    from exactly_once.http_api import idempotent_api as idempotent_api
    from exactly_once.http_request import HttpRequest as HttpRequest
    from exactly_once.http_response import HttpResponse as HttpResponse

_LAZY = {
    "ApiOutcome": "http_api",
    "HttpRequest": "http_request",
    "HttpResponse": "http_response",
    "IdempotentApi": "http_api",
    "idempotent_api": "http_api",
}

__all__ = [
    "AcquireStatus",
    "Acquisition",
    "ApiOutcome",
    "ConfigurationError",
    "ErrorInfo",
    "HttpRequest",
    "HttpResponse",
    "IdempotencyStore",
    "IdempotentApi",
    "LeasePolicy",
    "Lock",
    "LockedContext",
    "Outcome",
    "PermanentError",
    "RecordContext",
    "RecordResult",
    "RequestContext",
    "SqsConsumer",
    "SqsMessage",
    "Status",
    "StoredRecord",
    "WriteResult",
    "WriteStatus",
    "idempotent_api",
    "sqs_consumer",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
