"""`invoke` checks the event against the function's kind before running it (issue 26,
defect 5): an SQS event to the payments API exited 0, an SNS event to the orders consumer gave a
confusing message, an API event to it exited 1 with no error line. Now: one error line naming
the event's kind and the function's, exit 2, and the handler never runs.

The tables live in DynamoDB Local, so a handler that did run would not reach any real AWS.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from local_aws.dynamodb_local import DynamoDBLocal
from tests.cli.support import Invoke, QueuePair

EVENTS = Path(__file__).resolve().parents[2] / "events"

pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")

InvokeWith = Callable[[str, str], Result]


@pytest.fixture
def invoke(
    cli: Invoke,
    orders: QueuePair,
    fresh_idempotency_table: str,
    ledger_table: str,
    scope: str,
    monkeypatch: pytest.MonkeyPatch,
    dynamodb_local: DynamoDBLocal,
) -> InvokeWith:
    """`eonce invoke NAME --event FILE` with the test's tables; the checkout names the code."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_local.endpoint)
    settings = {
        "IDEMPOTENCY_TABLE": fresh_idempotency_table,
        "LEDGER_TABLE": ledger_table,
        "SUBSCRIBER_SCOPE": scope,
        "CONSUMER_SCOPE": scope,
        "API_SCOPE": scope,
        "DEAD_LETTER_QUEUE_URL": orders.dlq,
    }
    options = [arg for name, value in settings.items() for arg in ("--env", f"{name}={value}")]

    def run(name: str, event: str) -> Result:
        return cli("invoke", name, "--no-from-stack", "--event", event, *options)

    return run


SQS, SNS, API = "orders-single.json", "sns-sale.json", "api-payment-http-api.json"


@pytest.mark.parametrize(
    ("name", "sample", "message"),
    [
        ("PaymentsApi", SQS, "an SQS event, but PaymentsApi is an HTTP API"),
        ("PaymentsApi", SNS, "an SNS event, but PaymentsApi is an HTTP API"),
        ("orders", SNS, "an SNS event, but orders is a queue consumer"),
        ("orders", API, "an API Gateway event, but orders is a queue consumer"),
        ("salescounter", SQS, "an SQS event, but salescounter is a topic subscriber"),
        ("salescounter", API, "an API Gateway event, but salescounter is a topic subscriber"),
    ],
    ids=[
        "sqs-to-api",
        "sns-to-api",
        "sns-to-consumer",
        "api-to-consumer",
        "sqs-to-sub",
        "api-to-sub",
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
