"""The committed Kafka sample events (events/kafka-*.json): Lambda's MSK and self-managed Kafka
shapes as AWS documents them, checked by Powertools' own event models, and run through the
stream consumer on DynamoDB Local with the outcome each file is there to show."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aws_lambda_powertools.utilities.parser.models import (
    KafkaMskEventModel,
    KafkaSelfManagedEventModel,
)

from exactly_once import Outcome, RecordContext
from exactly_once_ops.lambda_context import LocalLambdaContext
from tests.streams.conftest import MakeStreamConsumer, dead_letters, reason_of

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

EVENTS = Path(__file__).resolve().parents[2] / "events"
KAFKA_EVENTS = sorted(path.name for path in EVENTS.glob("kafka-*.json"))
RECORD_FIELDS = {"topic", "partition", "offset", "timestamp", "timestampType", "key", "value"}


def load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return event


def values(event: dict[str, Any]) -> list[bytes]:
    return [
        base64.b64decode(record["value"])
        for records in event["records"].values()
        for record in records
    ]


def utf8_values(event: dict[str, Any]) -> dict[str, Any]:
    """The event for Powertools' model, which decodes every value as UTF-8 text: a value that
    is not (the poison sample's, on purpose) is swapped for one that is; the rest of the shape
    test still reads it as sent."""
    copy = json.loads(json.dumps(event))
    for records in copy["records"].values():
        for record in records:
            try:
                base64.b64decode(record["value"]).decode("utf-8")
            except UnicodeDecodeError:
                record["value"] = base64.b64encode(b"swapped").decode()
    return dict(copy)


def test_there_are_msk_and_self_managed_samples() -> None:
    sources = {load(name)["eventSource"] for name in KAFKA_EVENTS}
    assert sources == {"aws:kafka", "SelfManagedKafka"}


@pytest.mark.parametrize("name", KAFKA_EVENTS)
def test_each_sample_has_lambdas_kafka_shape(name: str) -> None:
    event = load(name)
    if event["eventSource"] == "aws:kafka":
        KafkaMskEventModel.model_validate(utf8_values(event))
        assert set(event) == {"eventSource", "eventSourceArn", "bootstrapServers", "records"}
        assert event["eventSourceArn"].startswith("arn:aws:kafka:")
    else:
        KafkaSelfManagedEventModel.model_validate(utf8_values(event))
        assert set(event) == {"eventSource", "bootstrapServers", "records"}
    for batch, records in event["records"].items():
        offsets = [record["offset"] for record in records]
        assert offsets == sorted(set(offsets))  # a partition's records in log order
        for record in records:
            assert set(record) == RECORD_FIELDS | {"headers"}
            assert batch == f"{record['topic']}-{record['partition']}"
            base64.b64decode(record["key"], validate=True)
            base64.b64decode(record["value"], validate=True)
            for header in record["headers"]:  # [{"name": [byte, ...]}]
                ((_name, raw),) = header.items()
                assert all(isinstance(b, int) and 0 <= b < 256 for b in raw)


def context() -> LocalLambdaContext:
    return LocalLambdaContext("kafka-samples", timeout_s=60)


def ran(runs: list[str]) -> Any:
    def handle(payload: Any, ctx: RecordContext) -> dict[str, Any]:
        runs.append(ctx.message_id)
        return {"order": payload["orderId"]}

    return handle


@pytest.mark.parametrize("name", ["kafka-msk-orders.json", "kafka-self-managed-orders.json"])
def test_the_orders_samples_run_each_order_once_and_a_republished_one_is_a_duplicate(
    build: MakeStreamConsumer, name: str
) -> None:
    event = load(name)
    orders = [json.loads(value)["orderId"] for value in values(event)]
    assert len(set(orders)) == len(orders) - 1  # one order id published twice
    runs: list[str] = []
    consumer = build(ran(runs))
    assert consumer(event, context()) == {"batchItemFailures": []}
    outcomes = [result.outcome for result in consumer.last_results]
    assert outcomes.count(Outcome.DUPLICATE) == 1
    assert len(runs) == len(orders) - 1
    # Lambda retries a batch it saw fail (a timeout): nothing runs again.
    assert consumer(event, context()) == {"batchItemFailures": []}
    assert len(runs) == len(orders) - 1


def test_the_poison_sample_dead_letters_each_bad_record_and_runs_the_good_ones(
    build: MakeStreamConsumer, sqs: SQSClient, dlq_url: str
) -> None:
    event = load("kafka-msk-poison.json")
    runs: list[str] = []
    consumer = build(ran(runs))
    assert consumer(event, context()) == {"batchItemFailures": []}  # the partition moves on
    # A lone surrogate is valid JSON: the handler gets it, and decides what it can store.
    assert runs == ["orders.created-0:300", "orders.created-0:303", "orders.created-0:306"]
    reasons = [reason_of(letter) for letter in dead_letters(sqs, dlq_url)]
    assert len(reasons) == 4  # not JSON, not UTF-8, nested too deeply, a 5000-digit integer
    assert all(reason.startswith("NonJsonBody: ") for reason in reasons), reasons
