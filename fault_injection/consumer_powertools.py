"""The orders consumer on Powertools 3 (BatchProcessor + idempotent_function), as documented.

Imported inside a worker process after its environment is set: Powertools builds its
persistence layer at import. It shares the layer's DynamoDB client, so both libraries get the
same retry policy and the same injected throttles. Powertools has no fence to offer a
downstream write, so its effect is the plain append.
"""

from __future__ import annotations

import os
from typing import Any

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

from exactly_once import clients
from fault_injection.business import process_order
from fault_injection.effects import append_unfenced

persistence = DynamoDBPersistenceLayer(
    table_name=os.environ["IDEMPOTENCY_TABLE"], boto3_client=clients.dynamodb()
)
config = IdempotencyConfig(
    event_key_jmespath="powertools_json(body).orderId", raise_on_no_idempotency_key=True
)
processor = BatchProcessor(event_type=EventType.SQS)


@idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence)  # type: ignore[untyped-decorator]
def record_handler(record: SQSRecord) -> dict[str, Any]:
    body = record.json_body
    key = str(body["orderId"])
    return process_order(
        body,
        key,
        int(record.attributes.approximate_receive_count),
        lambda amount: append_unfenced(
            key,
            0,
            record.message_id,
            amount,
            int(record.attributes.approximate_receive_count),
        ),
    )


def handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    config.register_lambda_context(context)  # in-progress records expire with the invocation
    return dict(
        process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    )
