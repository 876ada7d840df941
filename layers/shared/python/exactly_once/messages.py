"""Reading the fields of a Lambda SQS event record."""

from __future__ import annotations

import json
from typing import Any

from exactly_once.errors import PermanentError

# Message attributes this layer adds when it dead-letters a message. Their presence on a
# delivered message means it was replayed from the DLQ, which asks to retry a permanent failure.
ATTRIBUTE_PREFIX = "eo-"


class NonJsonBody(PermanentError):
    """The body is not JSON and the consumer did not opt into raw bodies."""


def message_id(record: Any) -> str:
    if isinstance(record, dict) and isinstance(record.get("messageId"), str):
        return str(record["messageId"])
    return ""


def parse_body(record: dict[str, Any], raw: bool) -> Any:
    body = record.get("body")
    if not isinstance(body, str):
        raise NonJsonBody(f"record has no string body (found {type(body).__name__})")
    if raw:
        return body
    try:
        return json.loads(body)
    except ValueError as exc:
        raise NonJsonBody(f"body is not JSON: {exc}") from exc


def is_replay(record: dict[str, Any]) -> bool:
    attributes = record.get("messageAttributes") or {}
    return isinstance(attributes, dict) and any(
        name.startswith(ATTRIBUTE_PREFIX) for name in attributes
    )


def group_id(record: Any) -> str | None:
    if not isinstance(record, dict):
        return None
    attributes = record.get("attributes")
    if not isinstance(attributes, dict):
        return None
    value = attributes.get("MessageGroupId")
    return str(value) if value is not None else None


def is_fifo_event(records: list[Any]) -> bool:
    return any(
        isinstance(r, dict) and str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records
    )


def queue_url_from_arn(arn: str, endpoint_url: str) -> str:
    """arn:aws:sqs:REGION:ACCOUNT:NAME -> ENDPOINT/ACCOUNT/NAME (works for AWS and local)."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"not an SQS queue ARN: {arn!r}")
    return f"{endpoint_url.rstrip('/')}/{parts[4]}/{parts[5]}"
