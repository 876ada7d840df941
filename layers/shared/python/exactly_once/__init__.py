"""Exactly-once processing on AWS Lambda: a fenced DynamoDB idempotency store behind SQS
consumers, HTTP APIs and any section of code (`once`).

The HTTP names (`idempotent_api`, `HttpRequest`, ...) and the general-purpose lock (`once`,
`begin`, `Claim`, ...) load on first use, so a queue consumer's cold start never imports them.
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
    from exactly_once.once_lock import Claim as Claim
    from exactly_once.once_lock import ClaimStatus as ClaimStatus
    from exactly_once.once_lock import NotAcquired as NotAcquired
    from exactly_once.once_lock import OnceBlock as OnceBlock
    from exactly_once.once_lock import OnceLock as OnceLock
    from exactly_once.once_lock import begin as begin
    from exactly_once.once_lock import once as once

_LAZY = {
    "ApiOutcome": "http_api",
    "Claim": "once_lock",
    "ClaimStatus": "once_lock",
    "HttpRequest": "http_request",
    "HttpResponse": "http_response",
    "IdempotentApi": "http_api",
    "NotAcquired": "once_lock",
    "OnceBlock": "once_lock",
    "OnceLock": "once_lock",
    "begin": "once_lock",
    "idempotent_api": "http_api",
    "once": "once_lock",
}

__all__ = [
    "AcquireStatus",
    "Acquisition",
    "ApiOutcome",
    "Claim",
    "ClaimStatus",
    "ConfigurationError",
    "ErrorInfo",
    "HttpRequest",
    "HttpResponse",
    "IdempotencyStore",
    "IdempotentApi",
    "LeasePolicy",
    "Lock",
    "LockedContext",
    "NotAcquired",
    "OnceBlock",
    "OnceLock",
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
    "begin",
    "idempotent_api",
    "once",
    "sqs_consumer",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
