"""Send a poison message straight to the DLQ, with attributes that say why.

SQS's own redrive would only move it after maxReceiveCount wasted deliveries and would carry
no reason; sending it ourselves is immediate and leaves the reason on the message.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from exactly_once.messages import ATTRIBUTE_PREFIX
from exactly_once.records import ErrorInfo

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_ATTRIBUTES = 10  # SQS's limit per message


def _to_send_attribute(attribute: dict[str, Any]) -> dict[str, Any]:
    """A Lambda-event attribute (stringValue/binaryValue as base64) -> SendMessage form."""
    data_type = attribute.get("dataType", "String")
    if attribute.get("binaryValue") is not None:
        return {"DataType": data_type, "BinaryValue": base64.b64decode(attribute["binaryValue"])}
    return {"DataType": data_type, "StringValue": str(attribute.get("stringValue", ""))}


def failure_attributes(
    record: dict[str, Any], error: ErrorInfo, consumer: str, attempt: int
) -> dict[str, dict[str, Any]]:
    """The original attributes plus ours, within SQS's limit of ten.

    When they don't fit, ours collapse into one JSON attribute, and any originals that still
    don't fit travel inside it, so nothing is lost.
    """
    original = {
        name: _to_send_attribute(value)
        for name, value in (record.get("messageAttributes") or {}).items()
        if not name.startswith(ATTRIBUTE_PREFIX)  # a replayed message's old reasons are stale
    }
    ours = {
        "eo-error-type": error.type,
        "eo-error-message": error.message or "(no message)",
        "eo-consumer": consumer,
        "eo-original-message-id": str(record.get("messageId", "")),
        "eo-attempt": str(attempt),
    }
    if len(original) + len(ours) <= MAX_ATTRIBUTES:
        return {
            **original,
            **{k: {"DataType": "String", "StringValue": v} for k, v in ours.items()},
        }
    kept = dict(list(original.items())[: MAX_ATTRIBUTES - 1])
    overflow = {k: v for k, v in (record.get("messageAttributes") or {}).items() if k not in kept}
    packed = {**ours, "eo-overflow-attributes": overflow} if overflow else ours
    return {**kept, "eo-failure": {"DataType": "String", "StringValue": json.dumps(packed)}}


def send_to_dead_letter_queue(
    sqs: SQSClient,
    queue_url: str,
    record: dict[str, Any],
    error: ErrorInfo,
    consumer: str,
    attempt: int,
) -> str:
    """Send the original body with its reason; returns the DLQ's message id. Raises on failure."""
    params: dict[str, Any] = {
        "QueueUrl": queue_url,
        "MessageBody": record.get("body") or "(empty body)",
        "MessageAttributes": failure_attributes(record, error, consumer, attempt),
    }
    if queue_url.endswith(".fifo"):
        system = record.get("attributes") or {}
        params["MessageGroupId"] = system.get("MessageGroupId") or "dead-letter"
        params["MessageDeduplicationId"] = (
            system.get("MessageDeduplicationId") or str(record.get("messageId")) or "dead-letter"
        )
    return str(sqs.send_message(**params)["MessageId"])
