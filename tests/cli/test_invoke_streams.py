"""`invoke` with stream events (issue 28): this repository's `OrderStream` (functions/order_stream,
a `@stream_consumer` keyed on the orderId) on the committed Kinesis, DynamoDB Streams and Kafka
samples, as `eonce invoke` runs the SQS, SNS and API samples.

Exit codes follow the event source mapping: 0 when the response names nothing to retry
(batchItemFailures empty: processed, duplicate, or dead-lettered as poison), 1 when it names a
position to resume at (the mapping would redeliver from there), 2 when the input is not a
stream event Lambda would send. Before, every stream event was refused as "not aws:sqs".
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.cli.support import InvokeWith, QueuePair, drain

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

EVENTS = Path(__file__).resolve().parents[2] / "events"
SEQUENCE = "4965800000000000000000000000000000000000000000000000000{:04d}"

pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")


def rows(output: str) -> list[tuple[str, str, str, str]]:
    """(position, key, outcome, redelivered) of each row of the results table."""
    found = []
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if len(cells) == 6 and cells[0] not in ("position", ""):
            found.append((cells[0], cells[1], cells[2], cells[3]))
    return found


def response(output: str) -> Any:
    """The printed batch response (the JSON after the table)."""
    start = output.index('{\n  "batchItemFailures"')
    return json.loads(output[start : output.index("\n}", start) + 2])


def kinesis_event(tmp_path: Path, orders: list[dict[str, Any]]) -> str:
    """One shard's records, in order, each order its own record."""
    records = []
    for index, order in enumerate(orders):
        sequence = SEQUENCE.format(index)
        records.append(
            {
                "kinesis": {
                    "kinesisSchemaVersion": "1.0",
                    "partitionKey": str(order["orderId"]),
                    "sequenceNumber": sequence,
                    "data": base64.b64encode(json.dumps(order).encode()).decode(),
                    "approximateArrivalTimestamp": 1767225600.0 + index,
                },
                "eventSource": "aws:kinesis",
                "eventVersion": "1.0",
                "eventID": f"shardId-000000000000:{sequence}",
                "eventName": "aws:kinesis:record",
                "awsRegion": "us-east-1",
                "eventSourceARN": "arn:aws:kinesis:us-east-1:123456789012:stream/order-stream",
            }
        )
    path = tmp_path / "kinesis.json"
    path.write_text(json.dumps({"Records": records}), encoding="utf-8")
    return str(path)


def test_the_kinesis_sample_runs_each_order_once(invoke: InvokeWith) -> None:
    """The sample puts o-8002 twice: its second record is a duplicate; a second invocation of
    the same batch (the mapping's retry) runs nothing again."""
    first = invoke("OrderStream", str(EVENTS / "stream-kinesis-orders.json"))
    assert first.exit_code == 0, first.output
    assert [(key, outcome, again) for _, key, outcome, again in rows(first.stdout)] == [
        ("o-8001", "processed", "no"),
        ("o-8002", "processed", "no"),
        ("o-8002", "duplicate", "no"),
        ("o-8003", "processed", "no"),
    ]
    assert [position[-4:] for position, *_ in rows(first.stdout)] == [
        "0000",
        "1000",
        "2000",
        "3000",
    ]
    assert response(first.stdout) == {"batchItemFailures": []}
    assert "OrderStream: 4 record(s)" in first.stdout

    again = invoke("orderstream", str(EVENTS / "stream-kinesis-orders.json"))
    assert again.exit_code == 0, again.output
    assert [outcome for _, _, outcome, _ in rows(again.stdout)] == ["duplicate"] * 4


def test_poison_goes_to_the_dlq_and_the_shard_moves_on(
    invoke: InvokeWith, sqs: SQSClient, orders: QueuePair
) -> None:
    """Not JSON, then a negative amount (PermanentError), then a good order: exit 0, nothing
    left to retry; both bad records are in the DLQ with their data."""
    result = invoke("OrderStream", str(EVENTS / "stream-kinesis-poison.json"))
    assert result.exit_code == 0, result.output
    assert [outcome for _, _, outcome, _ in rows(result.stdout)] == [
        "permanent",
        "permanent",
        "processed",
    ]
    assert response(result.stdout) == {"batchItemFailures": []}
    bodies = {message["Body"] for message in drain(sqs, orders.dlq)}
    assert bodies == {
        "orderId=o-8101;amount=3 (not JSON)",
        json.dumps({"orderId": "o-8102", "amount": -5, "customerId": "c-3"}),
    }


def test_a_failed_record_stops_its_shard_and_exits_1_until_retried(
    invoke: InvokeWith, tmp_path: Path
) -> None:
    """The second record fails once: the third is not run, the response names the second's
    sequence number (where the mapping resumes), exit 1. The mapping's redelivery from there
    runs both; the first is never run again."""
    event = kinesis_event(
        tmp_path,
        [
            {"orderId": "t-1", "amount": 1},
            {"orderId": "t-2", "amount": 2, "failTimes": 1},
            {"orderId": "t-3", "amount": 3},
        ],
    )
    first = invoke("OrderStream", event)
    assert first.exit_code == 1, first.output
    assert [(key, outcome, again) for _, key, outcome, again in rows(first.stdout)] == [
        ("t-1", "processed", "no"),
        ("t-2", "failed", "yes"),
        ("-", "skipped", "yes"),  # never read: its key is not known
    ]
    assert response(first.stdout) == {"batchItemFailures": [{"itemIdentifier": SEQUENCE.format(1)}]}
    errors = [line for line in first.output.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: the batch resumes at {SEQUENCE.format(1)}: the event source mapping would "
        "redeliver from there"
    ]

    retried = invoke("OrderStream", event)  # the whole batch again: t-1 is a duplicate
    assert retried.exit_code == 0, retried.output
    assert [outcome for _, _, outcome, _ in rows(retried.stdout)] == [
        "duplicate",
        "processed",
        "processed",
    ]


def test_the_dynamodb_streams_sample_runs(invoke: InvokeWith) -> None:
    """INSERT o-9001, MODIFY o-9001, REMOVE o-9002, keyed on the image's orderId: the MODIFY is
    the same key with another payload (its status changed), refused as a fingerprint mismatch
    and dead-lettered (docs/streams.md: key a table's changes by more than the item's id); no
    record is left to retry."""
    result = invoke("OrderStream", str(EVENTS / "stream-dynamodb-orders.json"))
    assert result.exit_code == 0, result.output
    assert rows(result.stdout) == [
        ("7000000000000000000001", "o-9001", "processed", "no"),
        ("7000000000000000000002", "o-9001", "permanent", "no"),
        ("7000000000000000000003", "o-9002", "processed", "no"),
    ]
    assert "FingerprintMismatch: key 'o-9001' was already used for a different payload" in (
        result.stdout
    )
    assert response(result.stdout) == {"batchItemFailures": []}


@pytest.mark.parametrize("sample", ["kafka-msk-orders.json", "kafka-self-managed-orders.json"])
def test_the_kafka_samples_run_per_partition(invoke: InvokeWith, sample: str) -> None:
    """Each partition's records in order, each named "<topic>-<partition>:<offset>"; a key sent
    twice is a duplicate."""
    result = invoke("OrderStream", str(EVENTS / sample))
    assert result.exit_code == 0, result.output
    found = rows(result.stdout)
    assert all(":" in position for position, *_ in found)
    outcomes = {(key, outcome) for _, key, outcome, _ in found}
    keys = [key for _, key, _, _ in found]
    twice = {key for key in keys if keys.count(key) == 2}
    assert twice, result.output  # each sample sends one order twice
    for key in twice:
        assert {(key, "processed"), (key, "duplicate")} <= outcomes
    assert response(result.stdout) == {"batchItemFailures": []}


def test_a_failed_kafka_record_names_its_partition_and_offset(
    invoke: InvokeWith, tmp_path: Path
) -> None:
    event = json.loads((EVENTS / "kafka-self-managed-orders.json").read_text())
    (records,) = event["records"].values()
    order = json.loads(base64.b64decode(records[1]["value"]))
    records[1]["value"] = base64.b64encode(
        json.dumps({**order, "orderId": "k-1", "failTimes": 1}).encode()
    ).decode()
    path = tmp_path / "kafka.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    result = invoke("OrderStream", str(path))
    assert result.exit_code == 1, result.output
    (failure,) = response(result.stdout)["batchItemFailures"]
    partition = f"{records[1]['topic']}-{records[1]['partition']}"
    assert failure == {"itemIdentifier": {"partition": partition, "offset": records[1]["offset"]}}
    assert f"the batch resumes at {partition} offset {records[1]['offset']}" in result.output


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda e: e["Records"][1].update(eventSource="aws:sqs"),
            "Records[1] comes from aws:sqs, not aws:kinesis",
        ),
        (
            lambda e: e["Records"][0]["kinesis"].pop("sequenceNumber"),
            "Records[0].kinesis has no sequenceNumber",
        ),
    ],
    ids=["mixed-sources", "no-position"],
)
def test_a_stream_event_lambda_would_never_send_is_refused(
    invoke: InvokeWith, tmp_path: Path, damage: Any, message: str
) -> None:
    event = json.loads((EVENTS / "stream-kinesis-orders.json").read_text())
    damage(event)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    result = invoke("OrderStream", str(path))
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"error: {path}: {message}"]


def test_an_empty_kafka_batch_is_refused(invoke: InvokeWith, tmp_path: Path) -> None:
    event = json.loads((EVENTS / "kafka-msk-orders.json").read_text())
    event["records"] = {}
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    result = invoke("OrderStream", str(path))
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"error: {path}: a Kafka event needs records: a list per topic-partition"
    ]
