"""`@sns_subscriber`: turn a function of (message, ctx) into the handler of a Lambda that is
subscribed directly to an SNS topic.

SNS invokes such a Lambda asynchronously and redelivers when it fails: Lambda retries the
event (twice by default), then hands it to the function's on-failure destination or DLQ. So,
unlike a queue batch, a record that must run again is reported by RAISING, after its FAILED
record is written; everything else returns normally:
- run and completed, or already completed (a duplicate delivery): success;
- failed permanently (bad input, a PermanentError, a reused key): sent to
  DEAD_LETTER_QUEUE_URL with its reason, then success, so Lambda does not retry it in vain;
- failed retryably, in progress elsewhere, or the store unreachable: `DeliveryFailed`.
Each record goes through the queue consumer's own processor (sqs/processor.py), so the keys,
fingerprints, fencing, dead-lettering and metrics are the ones queues have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from exactly_once import observability
from exactly_once.lease import LeasePolicy, remaining_ms
from exactly_once.outcomes import Outcome, RecordResult, count_outcomes
from exactly_once.sns.context import NotificationContext
from exactly_once.sns.messages import from_lambda_record
from exactly_once.sqs.keys import KeySpec
from exactly_once.sqs.record_entry import RecordEntry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

NotificationHandler = Callable[[Any, NotificationContext], Any]
SCOPE_VARIABLE = "SUBSCRIBER_SCOPE"


class DeliveryFailed(Exception):
    """Raised to have Lambda (and SNS) deliver the event again: a record failed retryably,
    is held by another invocation, or could not reach the store. Its FAILED record, if any,
    is already written."""

    def __init__(self, results: Sequence[RecordResult]) -> None:
        self.results = list(results)
        reasons = "; ".join(
            f"{r.message_id or '?'}: {r.outcome.value} ({r.reason or 'no reason'})"
            for r in self.results
        )
        super().__init__(f"{len(self.results)} notification(s) must be delivered again: {reasons}")


class SnsSubscriber(RecordEntry):
    """The Lambda handler: `subscriber(event, context) -> summary`, raising DeliveryFailed.

    Configuration is read on the first invocation (not at import) and whenever the
    environment changes: IDEMPOTENCY_TABLE, SUBSCRIBER_SCOPE (else the function's name),
    DEAD_LETTER_QUEUE_URL and the store settings the queue consumer reads.
    """

    scope_variable = SCOPE_VARIABLE
    context_type = NotificationContext

    def __call__(self, event: Any, context: Any = None) -> dict[str, int]:
        records = event.get("Records") if isinstance(event, dict) else None
        if not isinstance(records, list):
            # Nothing to run and nothing a retry could change: say so, and do not retry.
            observability.logger().error(
                "not an SNS event: no Records list", extra={"event_type": type(event).__name__}
            )
            self.last_results = []
            return {}
        messages = [from_lambda_record(record) for record in records]
        try:
            processor = self.processor()
        except Exception as exc:  # misconfiguration: retried, then the on-failure DLQ keeps it
            observability.logger().exception("subscriber is misconfigured")
            results = [
                RecordResult(m.message_id, Outcome.ERROR, True, reason=f"configuration: {exc}")
                for m in messages
            ]
        else:
            margin = processor.config.margin_for(remaining_ms(context))
            # SNS sends one record per invocation; several are run in turn.
            results = [processor.process(m, context, margin) for m in messages]
            _emit(processor.config.scope, results)
        self.last_results = results
        retry = [r for r in results if r.report_failure]
        if retry:
            raise DeliveryFailed(retry)
        return count_outcomes(results)


def _emit(scope: str, results: list[RecordResult]) -> None:
    """The log line and the EMF document a queue batch gets, dimensioned `subscriber`."""
    try:
        observability.logger().info("notifications done", extra=count_outcomes(results))
        observability.emit_batch_metrics(scope, results, dimension="subscriber")
    except Exception:  # metrics must never cost a record
        observability.logger().exception("could not emit metrics")


def sns_subscriber(
    *,
    key: KeySpec = None,
    raw_body: bool | None = None,
    fingerprint: bool | None = None,
    fingerprint_fields: Sequence[str] | None = None,
    table_name: str | None = None,
    dsn: str | None = None,
    scope: str | None = None,
    dead_letter_queue_url: str | None = None,
    block_takeover: bool | None = None,
    lease: LeasePolicy | None = None,
    deadline_margin_ms: int | None = None,
    result_cap_bytes: int | None = None,
    dynamodb_client: DynamoDBClient | None = None,
    sqs_client: SQSClient | None = None,
) -> Callable[[NotificationHandler], SnsSubscriber]:
    """Make `handler(message, ctx)` an exactly-once handler for a Lambda subscribed to a topic.

    `key`: None for the SNS MessageId (the same on every redelivery of one published
    message), a dotted path in the JSON Message ("order.id"), "attribute:Name" for an SNS
    message attribute, or a callable taking the event's record. Prefer a business key when a
    producer may publish the same thing twice: each Publish gets a new MessageId.
    Keyword arguments override the environment (IDEMPOTENCY_TABLE or
    IDEMPOTENCY_DSN, SUBSCRIBER_SCOPE,
    DEAD_LETTER_QUEUE_URL, BLOCK_EXPIRED_LEASES, ...).
    """
    overrides: dict[str, Any] = {
        "raw_body": raw_body,
        "fingerprint": fingerprint,
        "fingerprint_fields": fingerprint_fields,
        "table_name": table_name,
        "dsn": dsn,
        "scope": scope,
        "dead_letter_queue_url": dead_letter_queue_url,
        "block_takeover": block_takeover,
        "lease": lease,
        "deadline_margin_ms": deadline_margin_ms,
        "result_cap_bytes": result_cap_bytes,
        "sns_envelope": "off",  # the Message is the payload; it is not an envelope itself
    }

    def wrap(fn: NotificationHandler) -> SnsSubscriber:
        # The processor hands `fn` a NotificationContext (context_type), which it expects.
        return SnsSubscriber(fn, key, overrides, dynamodb_client, sqs_client)  # type: ignore[arg-type]

    return wrap
