"""The committed stream samples: regenerated exactly by `eonce event-samples`, and answered as
their docstring says by the repo's OrderStream function (functions/order_stream)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once import Outcome, RecordContext
from exactly_once_ops.lambda_context import LocalLambdaContext
from exactly_once_ops.sample_events import render
from exactly_once_ops.sample_stream_events import stream_sample_events
from tests.streams.conftest import MakeStreamConsumer, dead_letters, reason_of

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

EVENTS = Path(__file__).resolve().parents[2] / "events"


def read(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("name", sorted(stream_sample_events()))
def test_the_committed_sample_is_what_the_generator_writes(name: str) -> None:
    text = (EVENTS / name).read_text(encoding="utf-8")
    assert text == render(stream_sample_events()[name]), "regenerate: eonce event-samples"


def orders(payload: Any, ctx: RecordContext) -> str:
    from exactly_once import PermanentError

    if payload.get("amount", 0) < 0:
        raise PermanentError("amount must be a non-negative number")
    return str(payload["orderId"])


def context() -> LocalLambdaContext:
    return LocalLambdaContext("order-stream", timeout_s=60)


def test_kinesis_orders_put_twice_run_once_and_a_second_delivery_runs_nothing(
    build: MakeStreamConsumer,
) -> None:
    consumer = build(orders)
    event = read("stream-kinesis-orders.json")
    assert consumer(event, context()) == {"batchItemFailures": []}
    assert [r.outcome for r in consumer.last_results] == [
        Outcome.PROCESSED,
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.PROCESSED,
    ]
    assert consumer(event, context()) == {"batchItemFailures": []}
    assert {r.outcome for r in consumer.last_results} == {Outcome.DUPLICATE}


def test_kinesis_poison_goes_to_the_dlq_with_reasons_and_the_shard_moves_on(
    build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    consumer = build(orders)
    assert consumer(read("stream-kinesis-poison.json"), context()) == {"batchItemFailures": []}
    assert [r.outcome for r in consumer.last_results] == [
        Outcome.PERMANENT,
        Outcome.PERMANENT,
        Outcome.PROCESSED,
    ]
    reasons = sorted(reason_of(letter) for letter in dead_letters(sqs, dlq_url))
    assert [r.split(":")[0] for r in reasons] == ["NonJsonBody", "PermanentError"]


def test_a_table_streams_insert_modify_and_remove_by_position(
    build: MakeStreamConsumer,
) -> None:
    seen: list[tuple[str, Any]] = []

    def changes(payload: Any, ctx: RecordContext) -> None:
        seen.append((ctx.record["eventName"], payload))

    consumer = build(changes, key=None)  # every change is work of its own: key by position
    assert consumer(read("stream-dynamodb-orders.json"), context()) == {"batchItemFailures": []}
    assert seen == [
        ("INSERT", {"orderId": "o-9001", "amount": 25, "status": "placed"}),
        ("MODIFY", {"orderId": "o-9001", "amount": 25, "status": "paid"}),
        ("REMOVE", {"orderId": "o-9002", "amount": 40.5, "status": "cancelled"}),
    ]
