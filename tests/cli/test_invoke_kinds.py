"""`invoke` checks the event against the function's kind before running it (issue 26,
defect 5): an SQS event to the payments API exited 0, an SNS event to the orders consumer gave a
confusing message, an API event to it exited 1 with no error line. Now: one error line naming
the event's kind and the function's, exit 2, and the handler never runs.

The tables live in DynamoDB Local, so a handler that did run would not reach any real AWS.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.support import InvokeWith

EVENTS = Path(__file__).resolve().parents[2] / "events"

pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")


SQS, SNS, API = "orders-single.json", "sns-sale.json", "api-payment-http-api.json"
KINESIS, DYNAMODB, KAFKA = (
    "stream-kinesis-orders.json",
    "stream-dynamodb-orders.json",
    "kafka-msk-orders.json",
)
STREAM_TAKES = (
    "it takes Kinesis, DynamoDB Streams and Kafka events (see events/stream-*.json, "
    "events/kafka-*.json)"
)


@pytest.mark.parametrize(
    ("name", "sample", "message"),
    [
        ("PaymentsApi", SQS, "an SQS event, but PaymentsApi is an HTTP API"),
        ("PaymentsApi", SNS, "an SNS event, but PaymentsApi is an HTTP API"),
        ("orders", SNS, "an SNS event, but orders is a queue consumer"),
        ("orders", API, "an API Gateway event, but orders is a queue consumer"),
        ("salescounter", SQS, "an SQS event, but salescounter is a topic subscriber"),
        ("salescounter", API, "an API Gateway event, but salescounter is a topic subscriber"),
        ("orders", KINESIS, "a Kinesis event, but orders is a queue consumer: it takes SQS"),
        ("salescounter", DYNAMODB, "a DynamoDB Streams event, but salescounter is a topic"),
        ("PaymentsApi", KAFKA, "a Kafka event, but PaymentsApi is an HTTP API"),
        ("OrderStream", SQS, f"an SQS event, but OrderStream is a stream consumer: {STREAM_TAKES}"),
        ("OrderStream", SNS, "an SNS event, but OrderStream is a stream consumer"),
        ("orderstream", API, "an API Gateway event, but orderstream is a stream consumer"),
    ],
    ids=[
        "sqs-to-api",
        "sns-to-api",
        "sns-to-consumer",
        "api-to-consumer",
        "sqs-to-sub",
        "api-to-sub",
        "kinesis-to-consumer",
        "dynamodb-to-sub",
        "kafka-to-api",
        "sqs-to-stream",
        "sns-to-stream",
        "api-to-stream",
    ],
)
def test_an_event_of_another_kind_is_one_error_line_and_never_runs(
    invoke: InvokeWith, name: str, sample: str, message: str
) -> None:
    path = EVENTS / sample
    result = invoke(name, str(path))
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, result.output
    assert errors[0].startswith(f"error: {path}: {message}")
    assert result.stdout == ""  # no outcome, no response: the handler did not run
