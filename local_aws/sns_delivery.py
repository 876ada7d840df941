"""A local stand-in for SNS invoking a subscribed Lambda function asynchronously.

SNS hands a direct subscriber each message as an asynchronous invocation; when the function
raises, Lambda retries the same event (up to 2 more times, about a minute and then two minutes
later), and after the last failed attempt hands it to the function's on-failure destination
(an invocation record: the event as `requestPayload`, the error as `responsePayload`, the
condition `RetriesExhausted`) or, for a function configured with a dead-letter queue instead,
sends the event there with `RequestID`, `ErrorCode` and `ErrorMessage` attributes. A function
that returns has succeeded, whatever it returns. `deliver` does exactly that in this process,
with short, configurable delays, so a subscriber's retry path runs in seconds, not minutes.

The handler contract is the one `exactly_once.sns_subscriber` implements: return normally when
every record is done (processed, a duplicate, or dead-lettered by the handler itself as
permanent), raise when the record must be retried.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from exactly_once_ops.lambda_context import LocalLambdaContext
from exactly_once_ops.sns_events import lambda_sns_event, timestamp

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

RETRY_DELAYS_ENV = "EONCE_SNS_RETRY_DELAYS"
"""Seconds before each retry, comma-separated ("0.5,1"); Lambda's own are about 60 and 120."""
ERROR_MESSAGE_LIMIT = 1024  # Lambda truncates the DLQ's ErrorMessage attribute to 1 KB
FUNCTION_ERROR_CODE = "200"  # a function error: the invoke itself succeeded
RETRIES_EXHAUSTED = "RetriesExhausted"  # the on-failure record's condition
ON_FAILURE_DESTINATION = "destination"  # an invocation record, as an on-failure destination gets
DEAD_LETTER_QUEUE = "dlq"  # the event with error attributes, as a function's DLQ gets it


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class RetryPolicy:
    """Lambda's asynchronous retries: `retries` more attempts after a raised error (0-2 on
    Lambda), the n-th after `delays_s[n]` seconds (the last delay repeats)."""

    retries: int = 2
    delays_s: tuple[float, ...] = (0.5, 1.0)

    def __post_init__(self) -> None:
        if not 0 <= self.retries <= 2:
            raise ValueError(f"Lambda retries an async invocation 0 to 2 times, not {self.retries}")
        if any(delay < 0 for delay in self.delays_s):
            raise ValueError("retry delays cannot be negative")

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (0 for the first retry)."""
        if not self.delays_s:
            return 0.0
        return self.delays_s[min(retry, len(self.delays_s) - 1)]

    def with_retries(self, retries: int) -> RetryPolicy:
        return RetryPolicy(retries=retries, delays_s=self.delays_s)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        """Delays from EONCE_SNS_RETRY_DELAYS when set, else the short local defaults."""
        text = (environ if environ is not None else os.environ).get(RETRY_DELAYS_ENV, "").strip()
        if not text:
            return cls()
        try:
            delays = tuple(float(part) for part in text.split(","))
        except ValueError as exc:
            raise ValueError(f"{RETRY_DELAYS_ENV}={text!r}: expected seconds like 0.5,1") from exc
        return cls(delays_s=delays)


@dataclass(frozen=True)
class SubscriberBinding:
    """Everything a worker needs to deliver one topic's messages to one subscribed function."""

    subscriber: str  # the stack's subscriber id (SalesCounter)
    function_name: str
    source_dir: str
    handler: str  # "module.attribute"
    environment: dict[str, str]
    timeout_s: int
    topic_arn: str
    subscription_arn: str  # the Lambda subscription's, as the event's EventSubscriptionArn
    tap_queue_url: str  # where the local stack receives the topic's messages for this function
    dead_letter_queue_url: str  # where an event goes after its last failed retry
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    topic: str = ""  # the stack's topic id (Sales); the topic's name when not known
    failure_format: str = ON_FAILURE_DESTINATION  # or DEAD_LETTER_QUEUE: how that queue gets it
    function_arn: str = ""

    @property
    def label(self) -> str:
        return self.subscriber or self.function_name

    @property
    def topic_label(self) -> str:
        return self.topic or self.topic_arn.rsplit(":", 1)[-1]


def describe_subscribers(bindings: list[SubscriberBinding]) -> str:
    """One phrase per subscriber for start-up lines: "SalesCounter on Sales: 2 retries after
    0.5s, 1s, timeout 3s; ..."."""

    def retries(policy: RetryPolicy) -> str:
        if not policy.retries:
            return "no retries"
        waits = ", ".join(f"{policy.delay(n):g}s" for n in range(policy.retries))
        return f"{policy.retries} retries after {waits}"

    return "; ".join(
        f"{b.label} on {b.topic_label}: {retries(b.retry)}, timeout {b.timeout_s}s"
        for b in bindings
    )


@dataclass
class DeliveryStats:
    """What one SNS message's delivery did: sent to the supervisor over a queue."""

    subscriber: str
    delivered: int = 0  # SNS messages handed to the function (1, or 0 when not an envelope)
    attempts: int = 0  # invocations, retries included
    raised: int = 0  # invocations that raised (each retried or dead-lettered)
    dead_lettered: int = 0  # handed to the failure target after the last retry
    abandoned: int = 0  # stopped while waiting to retry: left for SNS (the tap) to redeliver
    malformed: int = 0  # tap messages that were no SNS envelope
    outcomes: Counter[str] = field(default_factory=Counter)
    takeovers: int = 0


def _count_results(stats: DeliveryStats, handler: Any) -> None:
    for result in getattr(handler, "last_results", None) or []:
        stats.outcomes[str(result.outcome)] += 1
        stats.takeovers += int(bool(getattr(result, "takeover", False)))


def on_failure_record(
    binding: SubscriberBinding,
    event: Mapping[str, Any],
    request_id: str,
    error: BaseException,
    attempts: int,
) -> dict[str, Any]:
    """The invocation record Lambda sends an on-failure destination after the last retry."""
    function_arn = binding.function_arn or binding.function_name
    return {
        "version": "1.0",
        "timestamp": timestamp(),
        "requestContext": {
            "requestId": request_id,
            "functionArn": f"{function_arn}:$LATEST",
            "condition": RETRIES_EXHAUSTED,
            "approximateInvokeCount": attempts,
        },
        "requestPayload": event,
        "responseContext": {
            "statusCode": int(FUNCTION_ERROR_CODE),
            "executedVersion": "$LATEST",
            "functionError": "Unhandled",
        },
        "responsePayload": {
            "errorMessage": str(error),
            "errorType": type(error).__name__,
            "requestId": request_id,
            "stackTrace": traceback.format_exception(error)[1:],
        },
    }


def dead_letter(
    sqs: SQSClient,
    binding: SubscriberBinding,
    event: Mapping[str, Any],
    request_id: str,
    error: BaseException,
    attempts: int,
) -> None:
    """Hand the event over after its last failed attempt, in the shape the function's failure
    target gets it (see the module's docstring)."""
    if binding.failure_format == DEAD_LETTER_QUEUE:
        message = f"{type(error).__name__}: {error}"[:ERROR_MESSAGE_LIMIT]
        sqs.send_message(
            QueueUrl=binding.dead_letter_queue_url,
            MessageBody=json.dumps(event),
            MessageAttributes={
                "RequestID": {"DataType": "String", "StringValue": request_id},
                "ErrorCode": {"DataType": "Number", "StringValue": FUNCTION_ERROR_CODE},
                "ErrorMessage": {"DataType": "String", "StringValue": message},
            },
        )
        return
    record = on_failure_record(binding, event, request_id, error, attempts)
    sqs.send_message(QueueUrl=binding.dead_letter_queue_url, MessageBody=json.dumps(record))


def deliver(
    sqs: SQSClient,
    binding: SubscriberBinding,
    handler: Callable[[Any, Any], Any],
    envelope: Mapping[str, Any],
    *,
    stop: StopFlag | None = None,
    sleep: Callable[[float], None] = time.sleep,
    region: str = "us-east-1",
) -> DeliveryStats:
    """Invoke the handler with the SNS event for `envelope`, retrying a raised error as Lambda
    does, and dead-letter the event after the last attempt.

    Every attempt carries the same event and the same request id, as Lambda's retries do.
    A stop request during a wait abandons the delivery (`abandoned`): the caller then leaves
    the message to be delivered again, as SNS would.
    """
    stats = DeliveryStats(binding.label, delivered=1)
    event = lambda_sns_event([envelope], binding.subscription_arn)
    request_id = LocalLambdaContext(binding.function_name).aws_request_id
    for attempt in range(binding.retry.retries + 1):
        if attempt:
            sleep(binding.retry.delay(attempt - 1))
            if stop is not None and stop.is_set():
                stats.abandoned += 1
                return stats
        context = LocalLambdaContext(
            binding.function_name,
            timeout_s=binding.timeout_s,
            aws_request_id=request_id,
            region=region,
        )
        stats.attempts += 1
        try:
            handler(event, context)
        except Exception as exc:
            traceback.print_exc()
            stats.raised += 1
            _count_results(stats, handler)
            if attempt == binding.retry.retries:
                dead_letter(sqs, binding, event, request_id, exc, stats.attempts)
                stats.dead_lettered += 1
            continue
        _count_results(stats, handler)
        return stats
    return stats
