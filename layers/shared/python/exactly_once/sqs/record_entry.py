"""What the queue consumer and the SNS subscriber share: a business function, its key, the
settings read per invocation, and the record processor built from them.

Both run each message through the same processor (processor.py); they differ in the event they
read, the context their function gets, where their scope is configured, and how they report.
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from exactly_once import lifecycle
from exactly_once.outcomes import RecordResult
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.context import RecordContext
from exactly_once.sqs.keys import KeySpec
from exactly_once.sqs.processor import Handler, RecordProcessor
from exactly_once.stores.protocol import open_store

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


class RecordEntry(ABC):
    """A Lambda handler over message records. Configuration is read on the first invocation
    (not at import) and whenever the environment changes."""

    scope_variable: ClassVar[str] = "CONSUMER_SCOPE"
    context_type: ClassVar[type[RecordContext]] = RecordContext

    def __init__(
        self,
        handler: Handler,
        key: KeySpec,
        overrides: dict[str, Any],
        dynamodb_client: DynamoDBClient | None = None,
        sqs_client: SQSClient | None = None,
    ) -> None:
        functools.update_wrapper(self, handler)
        self.handler = handler
        self.key = key
        self.overrides = overrides
        self._dynamodb_client = dynamodb_client
        self._sqs_client = sqs_client
        self._processor: RecordProcessor | None = None
        self._lock = threading.Lock()
        self._generation = lifecycle.generation()
        self.last_results: list[RecordResult] = []  # for local tools and tests

    @abstractmethod
    def __call__(self, event: Any, context: Any = None) -> Any:
        """The Lambda handler: each entry point reads its own event and reports its own way."""

    def processor(self) -> RecordProcessor:
        config = ConsumerConfig.resolve(self.overrides, self.scope_variable)
        if self._generation != lifecycle.generation():  # a clone: the lock may be held forever
            self._generation = lifecycle.generation()
            self._lock = threading.Lock()
            self._processor = None
        with self._lock:
            if self._processor is None or self._processor.config != config:
                store = open_store(config, self._dynamodb_client)
                self._processor = RecordProcessor(
                    self.handler,
                    self.key,
                    config,
                    store,
                    self._sqs_client,
                    context_type=self.context_type,
                )
            return self._processor
