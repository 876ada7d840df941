"""Audit: notes each Billing event once, in the app's own `Notices` table (one item per
execution, keyed by the event id and a fresh execution id, so a second run would show)."""

import os
import time
import uuid
from typing import Any

import boto3

from exactly_once import NotificationContext, sns_subscriber

_client: Any = None


def _dynamodb() -> Any:
    global _client
    if _client is None:
        _client = boto3.client("dynamodb")
    return _client


@sns_subscriber(key="eventId")
def note(message: dict[str, Any], ctx: NotificationContext) -> dict[str, Any]:
    execution = uuid.uuid4().hex
    _dynamodb().put_item(
        TableName=os.environ["NOTICES_TABLE"],
        Item={
            "eventId": {"S": ctx.key},
            "execution": {"S": execution},
            "attempt": {"N": str(ctx.attempt)},
            "notedAtMs": {"N": str(int(time.time() * 1000))},
        },
    )
    return {"eventId": ctx.key, "execution": execution}
