"""`invoke` with SNS events: the sales subscriber (`salescounter`, whose code is functions/sales)
on the committed samples, and the orders consumer on an SNS envelope.

Exit codes follow Lambda's asynchronous invocation: 0 when the handler returned (processed, a
duplicate, or dead-lettered as permanent), 1 when it raised (Lambda would retry the event).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from exactly_once_ops.sample_sns_events import SUBSCRIPTION_ARN, TOPIC_ARN
from exactly_once_ops.sns_events import lambda_sns_event, sns_envelope, timestamp
from tests.cli.support import InvokeWith, QueuePair, drain

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"

pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")


def sale_event(tmp_path: Path, sale: dict[str, object], message_id: str) -> str:
    envelope = sns_envelope(
        json.dumps(sale), topic_arn=TOPIC_ARN, message_id=message_id, sent_at=timestamp()
    )
    path = tmp_path / f"{message_id}.json"
    path.write_text(json.dumps(lambda_sns_event([envelope], SUBSCRIPTION_ARN)), encoding="utf-8")
    return str(path)


def outcome_rows(output: str) -> list[str]:
    """The outcome column of the results table, row by row (the header names it)."""
    outcomes = ("processed", "duplicate", "permanent", "failed", "in_progress")
    rows = [line for line in output.splitlines() if "│" in line and "outcome" not in line]
    return [
        next(word for word in outcomes if f" {word} " in line)
        for line in rows
        if any(f" {word} " in line for word in outcomes)
    ]


def test_the_sns_samples_run_in_order(
    invoke: InvokeWith, sqs: SQSClient, orders: QueuePair
) -> None:
    """The SNS sample events docs/cli.md and docs/operations.md show, in a row: the same
    message twice, the same sale published twice, attributes, and a poison message the handler
    dead-letters (exit 0: no retry)."""
    seen: dict[str, list[list[str]]] = {}
    for name in (
        "sns-sale.json",
        "sns-sale.json",
        "sns-sale-published-twice-1.json",
        "sns-sale-published-twice-2.json",
        "sns-sale-attributes.json",
        "sns-sale-poison.json",
    ):
        result = invoke("salescounter", str(EVENTS / name))
        assert result.exit_code == 0, result.output
        assert "FingerprintMismatch" not in result.output
        seen.setdefault(name, []).append(outcome_rows(result.output))
    assert seen["sns-sale.json"] == [["processed"], ["duplicate"]]
    assert seen["sns-sale-published-twice-1.json"] == [["processed"]]
    assert seen["sns-sale-published-twice-2.json"] == [["duplicate"]]  # keyed on the orderId
    assert seen["sns-sale-attributes.json"] == [["processed"]]
    assert seen["sns-sale-poison.json"] == [["permanent"]]
    (poison,) = drain(sqs, orders.dlq)
    assert poison["Body"] == "orderId=o-5301;amount=12 (not JSON)"
    assert "eo-error-type" in poison["MessageAttributes"]


def test_a_raised_delivery_exits_1_and_the_redelivery_runs_it(
    invoke: InvokeWith, tmp_path: Path
) -> None:
    event = sale_event(tmp_path, {"orderId": "t-1", "amount": 4, "failTimes": 1}, "m-t-1")
    first = invoke("salescounter", event)
    assert first.exit_code == 1
    assert "Lambda would retry the event, then send it to the function's DLQ" in first.output
    assert outcome_rows(first.output) == ["failed"]
    again = invoke("salescounter", event)  # Lambda's retry: the same event
    assert again.exit_code == 0, again.output
    assert outcome_rows(again.output) == ["processed"]


def test_the_orders_consumer_unwraps_an_sns_envelope_delivered_twice(invoke: InvokeWith) -> None:
    result = invoke("orders", str(EVENTS / "orders-sns-envelope.json"))
    assert result.exit_code == 0, result.output
    assert outcome_rows(result.output) == ["processed", "duplicate"]
    assert result.output.count(" o-6001 ") == 2  # the key came from inside the envelope


def test_an_sns_record_without_a_message_is_refused(invoke: InvokeWith, tmp_path: Path) -> None:
    event = json.loads((EVENTS / "sns-sale.json").read_text())
    del event["Records"][0]["Sns"]["Message"]
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    result = invoke("salescounter", str(path))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {path}: Records[0].Sns needs MessageId, Message and TopicArn strings"
    ]
