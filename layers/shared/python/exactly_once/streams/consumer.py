"""`@stream_consumer`: turn a function of (payload, ctx) into the handler of a Lambda reading a
Kinesis stream, a DynamoDB table's stream or a Kafka topic (Amazon MSK or self-managed).

Each record goes through the queue consumer's state machine (sqs/processor.py, in waves: one
store round trip claims a wave's keys, one more completes them), so the keys, fencing,
fingerprints, dead-lettering and metrics are the ones queues have. What streams add is order:
a shard's (or partition's) records run one after another, the first that fails stops the rest
of its shard, and the response names it, so the mapping resumes from it and nothing after it is
skipped. Poison goes to DEAD_LETTER_QUEUE_URL with its reason and counts as done, so one bad
record does not hold its shard until the mapping's retry limit or record age drops it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from exactly_once import observability
from exactly_once.lease import LeasePolicy
from exactly_once.sqs.keys import KeySpec
from exactly_once.sqs.processor import Handler
from exactly_once.sqs.record_entry import RecordEntry
from exactly_once.streams.records import read_event
from exactly_once.streams.responses import stream_response

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


class StreamConsumer(RecordEntry):
    """The Lambda handler: `consumer(event, context) -> {"batchItemFailures": [...]}`.

    It never raises: a raised error makes Lambda retry (or bisect) the whole batch, records
    that already completed included, where the response resumes at the first failure.
    """

    max_attempts_variable = "STREAM_MAX_ATTEMPTS"

    def __call__(self, event: Any, context: Any = None) -> dict[str, list[dict[str, Any]]]:
        records = read_event(event)
        if records is None:
            observability.logger().error(
                "not a stream event: no Records list or Kafka records",
                extra={"event_type": type(event).__name__},
            )
            self.last_results = []
            return {"batchItemFailures": []}
        results = self.run_batch([record.message for record in records], context)
        return stream_response(records, results)


def stream_consumer(
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
    max_attempts: int | None = None,
    dynamodb_client: DynamoDBClient | None = None,
    sqs_client: SQSClient | None = None,
) -> Callable[[Handler], StreamConsumer]:
    """Make `handler(payload, ctx)` an exactly-once handler for a stream's event source mapping
    (turn on ReportBatchItemFailures there).

    The payload is the record's data as JSON: a Kinesis record's data, a DynamoDB Streams
    record's new image (the old one for a REMOVE, the keys for KEYS_ONLY), a Kafka record's
    value. `key`: a dotted path in it ("order.id"), "attribute:partition-key" for the Kinesis
    partition key or the Kafka record key, "attribute:<name>" for a Kafka header, a callable
    taking the raw record, or None for the record's position (sequence number, or
    "topic-partition:offset"), which a retry keeps but a producer's second put does not.
    `concurrency`: how many shards or partitions run at once (a Kafka batch holds several).
    `max_attempts` (STREAM_MAX_ATTEMPTS): a record failing retryably this often is given up,
    to the DLQ with its reason. Other keyword arguments override the environment as for
    `sqs_consumer` (IDEMPOTENCY_TABLE or IDEMPOTENCY_DSN, CONSUMER_SCOPE,
    DEAD_LETTER_QUEUE_URL, BATCH_CONCURRENCY, ...).
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
        "max_attempts": max_attempts,
        "sns_envelope": "off",  # a stream's data is the payload, never an SNS envelope
    }

    def wrap(fn: Handler) -> StreamConsumer:
        return StreamConsumer(fn, key, overrides, dynamodb_client, sqs_client)

    return wrap
