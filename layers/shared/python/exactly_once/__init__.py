"""Exactly-once processing on AWS Lambda: a fenced idempotency store (DynamoDB, or PostgreSQL
with your writes in the same transaction) behind SQS consumers, SNS subscribers, HTTP APIs and
any section of code (`once`).

Every entry point runs on one state machine, the general-purpose lock (`once`, `begin`,
`claim`): the queue consumer, the SNS subscriber and the HTTP API take their keys through it.
The folders say where things are: the lock and its lease at the top (`once_lock`, `claims`,
`held_lock`, `once_block`, `lease`, `heartbeat`, `effects`, `ledger`), the stores in `stores/`
(the protocol, `dynamodb/`, `postgres/`, the codec and the record shapes), and one room per
entry point: `sqs/`, `sns/`, `streams/` (Kinesis, DynamoDB Streams, Kafka), `http/`. The SNS,
stream and HTTP names load on first use, as do `once`, `begin` and `OnceBlock`, and the
PostgreSQL store only when a DSN selects it, so a queue consumer's cold start never imports
them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from exactly_once import lifecycle
from exactly_once.claims import Claim, ClaimStatus, NotAcquired, claim
from exactly_once.context import LockedContext
from exactly_once.effects import LeaseLost
from exactly_once.errors import CommitFailed, ConfigurationError, LockInherited, PermanentError
from exactly_once.held_lock import OnceLock
from exactly_once.lease import LeasePolicy
from exactly_once.outcomes import Outcome, RecordResult
from exactly_once.sqs.consumer import SqsConsumer, sqs_consumer
from exactly_once.sqs.context import RecordContext
from exactly_once.sqs.messages import SqsMessage
from exactly_once.stores.dynamodb.store import IdempotencyStore
from exactly_once.stores.protocol import Store, open_store
from exactly_once.stores.records import (
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Lock,
    StoredRecord,
    WriteResult,
    WriteStatus,
)
from exactly_once.stores.schema import Status

if TYPE_CHECKING:
    from exactly_once.http.api import ApiOutcome as ApiOutcome
    from exactly_once.http.api import IdempotentApi as IdempotentApi
    from exactly_once.http.api import idempotent_api as idempotent_api
    from exactly_once.http.context import RequestContext as RequestContext
    from exactly_once.http.request import HttpRequest as HttpRequest
    from exactly_once.http.response import HttpResponse as HttpResponse
    from exactly_once.once_block import OnceBlock as OnceBlock
    from exactly_once.once_lock import begin as begin
    from exactly_once.once_lock import once as once
    from exactly_once.sns.context import NotificationContext as NotificationContext
    from exactly_once.sns.subscriber import DeliveryFailed as DeliveryFailed
    from exactly_once.sns.subscriber import SnsSubscriber as SnsSubscriber
    from exactly_once.sns.subscriber import sns_subscriber as sns_subscriber
    from exactly_once.steps.completer import Completer as Completer
    from exactly_once.steps.completer import complete_abandoned as complete_abandoned
    from exactly_once.steps.resumable import NotFinished as NotFinished
    from exactly_once.steps.resumable import Resumable as Resumable
    from exactly_once.steps.resumable import resumable as resumable
    from exactly_once.stores.postgres.store import PostgresStore as PostgresStore
    from exactly_once.streams.consumer import StreamConsumer as StreamConsumer
    from exactly_once.streams.consumer import stream_consumer as stream_consumer

_LAZY = {
    "DeliveryFailed": "sns.subscriber",
    "NotificationContext": "sns.context",
    "SnsSubscriber": "sns.subscriber",
    "sns_subscriber": "sns.subscriber",
    "ApiOutcome": "http.api",
    "HttpRequest": "http.request",
    "HttpResponse": "http.response",
    "IdempotentApi": "http.api",
    "RequestContext": "http.context",
    "idempotent_api": "http.api",
    "PostgresStore": "stores.postgres.store",
    "StreamConsumer": "streams.consumer",
    "stream_consumer": "streams.consumer",
    # `once` and `begin` resolve their store from settings when called; a queue consumer, an
    # SNS subscriber or an API never calls them, so their modules load on first use too.
    "OnceBlock": "once_block",
    "begin": "once_lock",
    "once": "once_lock",
    # Finishing abandoned keys (steps/): only code that defines or completes resumables.
    "NotFinished": "steps.resumable",
    "Resumable": "steps.resumable",
    "resumable": "steps.resumable",
    "Completer": "steps.completer",
    "complete_abandoned": "steps.completer",
}

__all__ = [
    "AcquireStatus",
    "Acquisition",
    "ApiOutcome",
    "Claim",
    "ClaimStatus",
    "CommitFailed",
    "Completer",
    "ConfigurationError",
    "DeliveryFailed",
    "ErrorInfo",
    "HttpRequest",
    "HttpResponse",
    "IdempotencyStore",
    "IdempotentApi",
    "LeaseLost",
    "LeasePolicy",
    "Lock",
    "LockInherited",
    "LockedContext",
    "NotAcquired",
    "NotFinished",
    "NotificationContext",
    "OnceBlock",
    "OnceLock",
    "Outcome",
    "PermanentError",
    "PostgresStore",
    "RecordContext",
    "RecordResult",
    "RequestContext",
    "Resumable",
    "SnsSubscriber",
    "SqsConsumer",
    "SqsMessage",
    "Status",
    "Store",
    "StoredRecord",
    "StreamConsumer",
    "WriteResult",
    "WriteStatus",
    "begin",
    "claim",
    "complete_abandoned",
    "idempotent_api",
    "once",
    "open_store",
    "resumable",
    "sns_subscriber",
    "sqs_consumer",
    "stream_consumer",
]

# At import, which is init: SnapStart's hooks must be registered before the snapshot is taken.
lifecycle.install()


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
