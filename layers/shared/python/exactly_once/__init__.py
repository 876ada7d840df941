"""Exactly-once SQS processing on AWS Lambda: a fenced DynamoDB idempotency store."""

from __future__ import annotations

from exactly_once.consumer import SqsConsumer, sqs_consumer
from exactly_once.context import RecordContext
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

__all__ = [
    "AcquireStatus",
    "Acquisition",
    "ConfigurationError",
    "ErrorInfo",
    "IdempotencyStore",
    "LeasePolicy",
    "Lock",
    "Outcome",
    "PermanentError",
    "RecordContext",
    "RecordResult",
    "SqsConsumer",
    "SqsMessage",
    "Status",
    "StoredRecord",
    "WriteResult",
    "WriteStatus",
    "sqs_consumer",
]
