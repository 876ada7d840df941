"""The two consumers under test, built the way each library documents, around the same work.

(a) this layer: `sqs_consumer(key="orderId")`, its defaults otherwise (10 records at a time);
(b) Powertools: `BatchProcessor(EventType.SQS)` + `process_partial_response`, the record handler
    wrapped in `idempotent_function` keyed on the same business id.
Both receive ready-made DynamoDB clients so the benchmark can instrument them identically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

from benchmarks.business import Work
from exactly_once import RecordContext, sqs_consumer

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

Consumer = Callable[[dict[str, Any], Any], dict[str, Any]]

# The business id inside the SQS body, as Powertools' JMESPath sees the raw record.
POWERTOOLS_KEY = "powertools_json(body).orderId"


def layer_consumer(
    work: Work,
    *,
    table: str,
    scope: str,
    dynamodb: DynamoDBClient,
    sqs: SQSClient,
    concurrency: int | None = None,
) -> Consumer:
    """`concurrency` None keeps the layer's default; 1 is only a diagnostic for the report."""

    def handle(body: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
        return work(body)

    return sqs_consumer(
        key="orderId",
        table_name=table,
        scope=scope,
        dynamodb_client=dynamodb,
        sqs_client=sqs,
        concurrency=concurrency,
    )(handle)


def powertools_consumer(work: Work, *, table: str, dynamodb: DynamoDBClient) -> Consumer:
    """Each call to this factory is a separate "execution environment" (its own processor).

    `raise_on_entire_batch_failure=False` only changes an all-failed batch (the in-progress
    probe) from raising to returning the same partial-batch response as the layer does.
    """
    persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=dynamodb)
    config = IdempotencyConfig(event_key_jmespath=POWERTOOLS_KEY)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    @idempotent_function(
        data_keyword_argument="record", config=config, persistence_store=persistence
    )  # type: ignore[untyped-decorator]
    def record_handler(record: SQSRecord) -> dict[str, Any]:
        return work(record.json_body)

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        config.register_lambda_context(context)  # so in-progress locks expire with the invocation
        return dict(
            process_partial_response(
                event=event, record_handler=record_handler, processor=processor, context=context
            )
        )

    return handler
