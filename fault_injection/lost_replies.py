"""Commit a request, then lose its reply, so botocore retries a write it already made.

A `before-send` handler sends the signed request itself (so DynamoDB really applies it), throws
the answer away and hands botocore a 500 instead. botocore's retry mode then sends the same
operation again, and that retry meets the state its own first attempt left: exactly what a
dropped connection after a commit does in production.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from botocore.awsrequest import AWSResponse
from botocore.httpsession import URLLib3Session

from fault_injection.throttling import error_response

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

_BODY = json.dumps(
    {
        "__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",
        "message": "the reply was lost after the request was applied (injected)",
    }
).encode("utf-8")


def install_lost_replies(
    client: DynamoDBClient | SQSClient,
    lose: Callable[[str], bool],
    on_lost: Callable[[str], None] | None = None,
) -> None:
    """For each request whose operation name `lose(name)` accepts: apply it, then fail the reply.

    `lose` is asked once per attempt (retries included), so a callable that answers True once
    loses exactly one reply and lets the retry through.
    """
    session = URLLib3Session()
    lock = threading.Lock()

    def before_send(request: Any, event_name: str = "", **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        with lock:
            hit = lose(operation)
        if not hit:
            return None
        session.send(request)  # the service applies it; the caller never hears
        if on_lost is not None:
            on_lost(operation)
        return error_response(str(request.url), 500, _BODY)

    service = client.meta.service_model.endpoint_prefix  # "dynamodb", "sqs"
    client.meta.events.register(f"before-send.{service}", cast("Callable[..., None]", before_send))


def lose_next(*operations: str, times: int = 1) -> Callable[[str], bool]:
    """A `lose` that loses the next `times` replies of the named operations, then none."""
    left = {name: times for name in operations}

    def lose(operation: str) -> bool:
        if left.get(operation, 0) > 0:
            left[operation] -= 1
            return True
        return False

    return lose
