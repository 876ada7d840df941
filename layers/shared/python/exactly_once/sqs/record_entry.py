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

from exactly_once import lifecycle, observability
from exactly_once.lease import remaining_ms
from exactly_once.outcomes import Outcome, RecordResult, count_outcomes
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.context import RecordContext
from exactly_once.sqs.keys import KeySpec
from exactly_once.sqs.messages import SqsMessage
from exactly_once.sqs.processor import Handler, RecordProcessor
from exactly_once.sqs.waves import run_waves
from exactly_once.stores.protocol import open_store

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


class RecordEntry(ABC):
    """A Lambda handler over message records. Configuration is read on the first invocation
    (not at import) and whenever the environment changes."""

    scope_variable: ClassVar[str] = "CONSUMER_SCOPE"
    max_attempts_variable: ClassVar[str | None] = None
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
        config = ConsumerConfig.resolve(
            self.overrides, self.scope_variable, self.max_attempts_variable
        )
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

    def run_batch(self, messages: list[SqsMessage], context: Any) -> list[RecordResult]:
        """A batch through the waves (sqs/waves.py), logged and counted; never raises. A
        misconfiguration reports every record failed, losing none."""
        try:
            processor = self.processor()
        except Exception as exc:
            observability.logger().exception("consumer is misconfigured")
            results = [
                RecordResult(m.message_id, Outcome.ERROR, True, reason=f"configuration: {exc}")
                for m in messages
            ]
        else:
            margin = processor.config.margin_for(remaining_ms(context))
            results = run_waves(processor, messages, context, margin)
            _log_summary(results)
            try:
                observability.emit_batch_metrics(processor.config.scope, results)
            except Exception:  # metrics must never cost a record
                observability.logger().exception("could not emit metrics")
        self.last_results = results
        return results


def _log_summary(results: list[RecordResult]) -> None:
    failures = sum(r.report_failure for r in results)
    observability.logger().info(
        "batch done",
        extra={"records": len(results), "reported_failures": failures, **count_outcomes(results)},
    )
