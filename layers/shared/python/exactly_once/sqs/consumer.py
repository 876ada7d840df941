"""`@sqs_consumer`: turn a function of (body, ctx) into a Lambda SQS handler."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from exactly_once import observability
from exactly_once.lease import LeasePolicy
from exactly_once.sqs.batch import batch_response
from exactly_once.sqs.keys import KeySpec
from exactly_once.sqs.messages import SqsMessage
from exactly_once.sqs.processor import Handler
from exactly_once.sqs.record_entry import RecordEntry

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

BatchResponse = dict[str, list[dict[str, str]]]


class SqsConsumer(RecordEntry):
    """The Lambda handler: `consumer(event, context) -> {"batchItemFailures": [...]}`.

    It never raises: an all-failed batch is reported, not thrown,
    because a raised error retries the whole batch and makes Lambda back off.
    """

    def __call__(self, event: Any, context: Any = None) -> BatchResponse:
        records = event.get("Records") if isinstance(event, dict) else None
        if not isinstance(records, list):
            observability.logger().error(
                "not an SQS event: no Records list", extra={"event_type": type(event).__name__}
            )
            return {"batchItemFailures": []}
        messages = [SqsMessage.from_record(record) for record in records]  # the one reading
        return batch_response(self.run_batch(messages, context))


def sqs_consumer(
    *,
    key: KeySpec = None,
    raw_body: bool | None = None,
    fingerprint: bool | None = None,
    fingerprint_fields: Sequence[str] | None = None,
    table_name: str | None = None,
    dsn: str | None = None,
    scope: str | None = None,
    dead_letter_queue_url: str | None = None,
    concurrency: int | None = None,
    block_takeover: bool | None = None,
    lease: LeasePolicy | None = None,
    deadline_margin_ms: int | None = None,
    result_cap_bytes: int | None = None,
    sns_envelope: str | None = None,
    dynamodb_client: DynamoDBClient | None = None,
    sqs_client: SQSClient | None = None,
) -> Callable[[Handler], SqsConsumer]:
    """Make `handler(body, ctx)` an exactly-once Lambda SQS handler: `@sqs_consumer(key=...)`.

    `key`: a dotted body path ("order.id"), "attribute:Name", a callable taking the raw record,
    or None for the messageId. Prefer a business key: a DLQ replay gives a new messageId.
    `sns_envelope` (SNS_ENVELOPE): "auto" reads the notification inside a body that is an SNS
    envelope (a topic subscription without raw delivery): the key and the body come from it,
    and None means the SNS MessageId; "on" requires one; "off" (default) never looks. The CDK
    construct sets "auto" on the queues it subscribes to a topic.
    Keyword arguments override the environment (IDEMPOTENCY_TABLE or
    IDEMPOTENCY_DSN, CONSUMER_SCOPE,
    DEAD_LETTER_QUEUE_URL, BATCH_CONCURRENCY, BLOCK_EXPIRED_LEASES, ...).
    """
    overrides: dict[str, Any] = {
        "raw_body": raw_body,
        "fingerprint": fingerprint,
        "fingerprint_fields": fingerprint_fields,
        "table_name": table_name,
        "dsn": dsn,
        "scope": scope,
        "dead_letter_queue_url": dead_letter_queue_url,
        "concurrency": concurrency,
        "block_takeover": block_takeover,
        "lease": lease,
        "deadline_margin_ms": deadline_margin_ms,
        "result_cap_bytes": result_cap_bytes,
        "sns_envelope": sns_envelope,
    }

    def wrap(fn: Handler) -> SqsConsumer:
        return SqsConsumer(fn, key, overrides, dynamodb_client, sqs_client)

    return wrap
