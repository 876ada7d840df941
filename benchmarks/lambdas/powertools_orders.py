"""The same orders consumer on Powertools, as its documentation lays it out."""

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

persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
config = IdempotencyConfig(event_key_jmespath="powertools_json(body).orderId")
processor = BatchProcessor(event_type=EventType.SQS)


@idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence)  # type: ignore[untyped-decorator]
def record_handler(record: SQSRecord) -> dict[str, Any]:
    return {"orderId": record.json_body["orderId"], "accepted": True}


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    config.register_lambda_context(context)
    return dict(
        process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
    )
