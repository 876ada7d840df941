"""Throttle a share of a client's DynamoDB requests before they leave the process.

A `before-send` handler that returns a response short-circuits the HTTP call, and botocore
then parses it like any other: a ProvisionedThroughputExceededException goes through the
client's own retry mode (standard: backoff, retry quota), and only what is still throttled
after the last attempt reaches the consumer. That is the path a real throttle takes.
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, cast

from botocore.awsrequest import AWSResponse, HTTPHeaders

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

THROTTLE_CODE = "ProvisionedThroughputExceededException"
_BODY = json.dumps(
    {
        "__type": f"com.amazonaws.dynamodb.v20120810#{THROTTLE_CODE}",
        "message": "The level of configured provisioned throughput for the table was exceeded "
        "(injected by the chaos harness)",
    }
).encode("utf-8")


class _Body:
    """The `raw` a botocore AWSResponse reads its content from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def error_response(url: str, status: int, body: bytes) -> AWSResponse:
    """A DynamoDB JSON error reply that botocore parses (and retries) like a real one."""
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/x-amz-json-1.0"
    headers["x-amzn-RequestId"] = uuid.uuid4().hex
    headers["Content-Length"] = str(len(body))
    return AWSResponse(url, status, headers, _Body(body))


def throttle_response(url: str) -> AWSResponse:
    return error_response(url, 400, _BODY)


# The requests (counted from 1, retries included) a chaos worker process throttles whatever the
# draw. A run of a few hundred messages sends only a few hundred requests through batched
# acquires, so at a 5 % rate the draws alone give about 16 throttles and sometimes under 10;
# these make "throttles happened" hold by plan: the requests come from at most the workers
# plus the respawns after planned crashes, so some process always reaches its 8th.
THROTTLED_EACH_PROCESS = (3, 8)


def install_throttling(
    client: DynamoDBClient,
    rate: float,
    rng: random.Random,
    on_throttle: Callable[[str], None] | None = None,
    planned: Collection[int] = (),
) -> None:
    """Answer `rate` of the client's requests with a throttle; `on_throttle(operation)` counts.

    `planned` (e.g. THROTTLED_EACH_PROCESS) throttles the client's n-th request whatever the
    draw; every request still takes its draw, so a seeded run's other draws are unchanged.
    """
    if rate <= 0:
        return
    lock = threading.Lock()  # Random and the count are not safe to share between threads
    sent = 0

    def before_send(request: Any, event_name: str = "", **_: Any) -> AWSResponse | None:
        nonlocal sent
        with lock:
            sent += 1
            hit = rng.random() < rate or sent in planned
        if not hit:
            return None
        if on_throttle is not None:
            on_throttle(event_name.rsplit(".", 1)[-1])
        return throttle_response(str(request.url))

    # The stubs type handlers as returning None, but before-send handlers may return a response.
    client.meta.events.register("before-send.dynamodb", cast("Callable[..., None]", before_send))
