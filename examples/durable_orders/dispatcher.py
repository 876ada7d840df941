"""The dispatcher: a plain Lambda SQS handler that starts one durable execution per order.

AWS documents that an event source mapping gives a durable function no idempotent start: each
invocation, retries included, starts a new durable execution. Its advice is a regular function
in front that invokes the durable function with an execution name. This is that function. For
each message it invokes the workflow asynchronously (InvocationType Event: a durable execution
may outlive the 15 minutes a synchronous or ESM invocation is allowed) with the order's
deterministic name and payload (naming.py), so a redelivered message (a timeout, a batch
retried after another message failed, a crash after the Invoke) starts no second execution:

- 202: the execution was started, or (same name, same payload) Lambda answered the existing one.
- DurableExecutionAlreadyStartedException (409): an execution with this name exists with
  another payload: another message for the same order id. The order's one execution is started,
  so the message is done here (logged, not retried: retrying cannot change the answer); the
  workflow's `once` fingerprint is what tells a changed order from a repeated one.
- Anything else (throttling, a 5xx, a network error after botocore's retries, a body that is
  no order): the message is reported in `batchItemFailures` and SQS delivers it again (the
  queue's redrive policy moves a poison message to its DLQ). Configure the mapping with
  ReportBatchItemFailures.

The dispatcher keeps no state: the name is its idempotency key, and the workflow's `once` on the
order id covers what the name does not (docs/steps-durable.md, "What remains").
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from examples.durable_orders.naming import execution_name, payload
from examples.durable_orders.settings import SCOPE

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

ALREADY_STARTED = "DurableExecutionAlreadyStartedException"  # the service model's error code
FUNCTION_ENV = "ORDER_WORKFLOW_FUNCTION"  # the workflow's qualified name or ARN (version/alias)

log = logging.getLogger(__name__)


class Outcome(StrEnum):
    STARTED = "started"  # 202: a new execution, or the existing one with the same payload
    ALREADY_STARTED = "already_started"  # 409: the name exists with another payload
    RETRY = "retry"  # reported in batchItemFailures: SQS delivers the message again


@dataclass(frozen=True)
class Dispatched:
    """What became of one message."""

    message_id: str
    outcome: Outcome
    execution_name: str | None = None
    execution_arn: str | None = None
    reason: str | None = None


class NotAnOrder(ValueError):
    """The body is no JSON object with a non-empty string `order_id`."""


def order_of(body: str) -> dict[str, Any]:
    """The order in a message body (a JSON object with a non-empty string `order_id`)."""
    try:
        order = json.loads(body)
    except (ValueError, RecursionError) as bad:
        raise NotAnOrder(f"not JSON: {bad}") from None
    if not isinstance(order, dict):
        raise NotAnOrder("not a JSON object")
    order_id = order.get("order_id")
    if not isinstance(order_id, str) or not order_id:
        raise NotAnOrder("no order_id string")
    return order


def start(client: LambdaClient, function_name: str, message: dict[str, Any]) -> Dispatched:
    """Invoke the workflow for one SQS message, asynchronously, under its order's name."""
    message_id = message["messageId"]
    try:
        order = order_of(message["body"])
    except NotAnOrder as poison:
        log.error("not an order: left to the queue's redrive policy", extra={"id": message_id})
        return Dispatched(message_id, Outcome.RETRY, reason=str(poison))
    name = execution_name(SCOPE, order["order_id"])
    try:
        response = client.invoke(
            FunctionName=function_name,
            InvocationType="Event",
            DurableExecutionName=name,
            Payload=payload(order),
        )
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code == ALREADY_STARTED:
            log.warning(
                "the order's execution exists with another payload: not started again",
                extra={"id": message_id, "execution_name": name},
            )
            return Dispatched(message_id, Outcome.ALREADY_STARTED, name, reason=code)
        return Dispatched(message_id, Outcome.RETRY, name, reason=code or str(error))
    except BotoCoreError as error:  # no answer after botocore's retries: try again later
        return Dispatched(message_id, Outcome.RETRY, name, reason=repr(error))
    return Dispatched(message_id, Outcome.STARTED, name, response.get("DurableExecutionArn"))


def dispatch(
    event: dict[str, Any], client: LambdaClient, function_name: str
) -> tuple[list[Dispatched], dict[str, Any]]:
    """Each message of an SQS batch started; returns what became of each and the partial batch
    response (the messages SQS must deliver again)."""
    results = [start(client, function_name, message) for message in event.get("Records", [])]
    failures = [{"itemIdentifier": r.message_id} for r in results if r.outcome is Outcome.RETRY]
    return results, {"batchItemFailures": failures}


_client: LambdaClient | None = None


def lambda_client() -> LambdaClient:
    """One Lambda client per container, made at the first message (not at import)."""
    global _client
    if _client is None:
        import boto3
        from botocore.config import Config

        _client = boto3.client("lambda", config=Config(retries={"mode": "standard"}))
    return _client


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point for the SQS event source mapping (ReportBatchItemFailures)."""
    _, response = dispatch(event, lambda_client(), os.environ[FUNCTION_ENV])
    return response
