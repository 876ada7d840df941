"""The committed `events/*.json` and the `event` command produce Lambda-shaped SQS events."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from aws_lambda_powertools.utilities.parser.models import SqsModel

from exactly_once_ops.sample_events import (
    Attr,
    AttributeValue,
    md5_of_attributes,
    render,
    sample_events,
    sqs_event,
)
from exactly_once_ops.sns_events import parse_envelope
from tests.cli.support import Invoke

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

EVENTS = Path(__file__).resolve().parents[2] / "events"
RECORD_KEYS = {
    "messageId",
    "receiptHandle",
    "body",
    "attributes",
    "messageAttributes",
    "md5OfBody",
    "eventSource",
    "eventSourceARN",
    "awsRegion",
}
FIFO_ATTRIBUTES = {"SequenceNumber", "MessageGroupId", "MessageDeduplicationId"}
STANDARD_ATTRIBUTES = {
    "ApproximateReceiveCount",
    "SentTimestamp",
    "SenderId",
    "ApproximateFirstReceiveTimestamp",
}


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return document


def check_shape(event: dict[str, Any]) -> None:
    """Lambda's record shape: keys, attribute names, checksums, ARN; powertools parses it."""
    SqsModel.model_validate(event)
    assert set(event) == {"Records"}
    for record in event["Records"]:
        keys = set(record)
        if record["messageAttributes"]:
            assert keys == RECORD_KEYS | {"md5OfMessageAttributes"}
        else:
            assert keys == RECORD_KEYS
        body_md5 = hashlib.md5(record["body"].encode(), usedforsecurity=False).hexdigest()
        assert record["md5OfBody"] == body_md5
        assert record["eventSource"] == "aws:sqs"
        queue = record["eventSourceARN"].rsplit(":", 1)[1]
        assert record["eventSourceARN"] == f"arn:aws:sqs:us-east-1:123456789012:{queue}"
        assert record["awsRegion"] == "us-east-1"
        expected = STANDARD_ATTRIBUTES | (FIFO_ATTRIBUTES if queue.endswith(".fifo") else set())
        assert set(record["attributes"]) == expected
        for attr in record["messageAttributes"].values():
            assert attr["stringListValues"] == []
            assert attr["binaryListValues"] == []
            assert attr["dataType"].split(".")[0] in {"String", "Number", "Binary"}
    ids = [r["messageId"] for r in event["Records"]]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("name", sorted(sample_events()))
def test_committed_sample_is_valid_and_up_to_date(name: str) -> None:
    text = (EVENTS / name).read_text(encoding="utf-8")
    assert text == render(sample_events()[name]), "regenerate: eonce event-samples"
    check_shape(json.loads(text))


def test_single_order() -> None:
    (record,) = load("orders-single.json")["Records"]
    assert json.loads(record["body"])["orderId"] == "o-1001"


def test_batch_has_ten_records_some_sharing_an_order_id() -> None:
    records = load("orders-batch-duplicates.json")["Records"]
    assert len(records) == 10
    order_ids = [json.loads(r["body"])["orderId"] for r in records]
    assert len(set(order_ids)) < len(order_ids)


def test_fifo_sample_has_two_account_groups() -> None:
    records = load("payments-fifo-two-groups.json")["Records"]
    assert all(r["eventSourceARN"].endswith(".fifo") for r in records)
    for record in records:
        body = json.loads(record["body"])
        assert set(body) >= {"paymentId", "accountId"}
        assert record["attributes"]["MessageGroupId"] == body["accountId"]
    assert len({r["attributes"]["MessageGroupId"] for r in records}) == 2
    sequence = [int(r["attributes"]["SequenceNumber"]) for r in records]
    assert sequence == sorted(sequence)


def test_poison_body_is_not_json() -> None:
    (record,) = load("orders-poison.json")["Records"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(record["body"])


def test_message_attributes_sample_has_string_and_number() -> None:
    (record,) = load("orders-message-attributes.json")["Records"]
    types = {a["dataType"].split(".")[0] for a in record["messageAttributes"].values()}
    assert types == {"String", "Number"}


def test_md5_of_attributes_matches_what_sqs_computes(sqs: SQSClient) -> None:
    """moto implements SQS's checksum; ours must agree for every attribute type."""
    url = sqs.create_queue(QueueName="md5")["QueueUrl"]
    attributes: dict[str, AttributeValue] = {
        "source": "checkout",
        "priority": 2,
        "weight": Attr("Number.float", "0.5"),
        "blob": b"\x00\x01binary",
    }
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody="x",
        MessageAttributes={
            "source": {"DataType": "String", "StringValue": "checkout"},
            "priority": {"DataType": "Number", "StringValue": "2"},
            "weight": {"DataType": "Number.float", "StringValue": "0.5"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01binary"},
        },
    )
    assert md5_of_attributes(attributes) == sent["MD5OfMessageAttributes"]


def test_sqs_event_function_fifo_and_per_message_attributes() -> None:
    event = sqs_event(
        ["a", "b"],
        queue_name="q.fifo",
        group_ids=["g1", "g2"],
        attributes=[{"n": 1}, {"s": "x"}],
        receive_count=3,
    )
    check_shape(event)
    first, second = event["Records"]
    assert first["attributes"]["ApproximateReceiveCount"] == "3"
    assert first["attributes"]["MessageDeduplicationId"] == hashlib.sha256(b"a").hexdigest()
    assert (first["attributes"]["MessageGroupId"], second["attributes"]["MessageGroupId"]) == (
        "g1",
        "g2",
    )
    assert first["messageAttributes"]["n"]["dataType"] == "Number"
    assert second["messageAttributes"]["s"]["stringValue"] == "x"
    with pytest.raises(ValueError, match="MessageGroupId"):
        sqs_event(["a"], queue_name="q.fifo")


def test_event_command_prints_a_fifo_event(cli: Invoke) -> None:
    result = cli(
        "event",
        "--body",
        '{"orderId": "o-1"}',
        "--queue",
        "orders-queue.fifo",
        "--group-id",
        "g1",
        "--attribute",
        "source=cli",
        "--attribute",
        "tries:Number=2",
    )
    assert result.exit_code == 0, result.output
    event = json.loads(result.stdout)
    check_shape(event)
    (record,) = event["Records"]
    assert record["body"] == '{"orderId": "o-1"}'
    assert record["attributes"]["MessageGroupId"] == "g1"
    assert record["messageAttributes"]["tries"]["dataType"] == "Number"


def test_event_command_writes_a_file(cli: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "ev.json"
    result = cli("event", "--body", "one", "--body", "two", "--output", str(out))
    assert result.exit_code == 0, result.output
    event = json.loads(out.read_text(encoding="utf-8"))
    check_shape(event)
    assert [r["body"] for r in event["Records"]] == ["one", "two"]


def test_event_command_fifo_without_group_is_one_line(cli: Invoke) -> None:
    result = cli("event", "--body", "x", "--queue", "q.fifo")
    assert result.exit_code == 2
    assert result.output.strip() == "error: FIFO records need a MessageGroupId"


def test_event_samples_command_writes_the_committed_files(cli: Invoke, tmp_path: Path) -> None:
    result = cli("event-samples", str(tmp_path))
    assert result.exit_code == 0, result.output
    for name in sample_events():
        assert (tmp_path / name).read_text(encoding="utf-8") == (EVENTS / name).read_text(
            encoding="utf-8"
        )


def test_sample_keys_do_not_collide_across_files() -> None:
    """Invoked in any order, no sample reuses a key for another payload (the layer would
    dead-letter it as a FingerprintMismatch); a repeat within a file is a deliberate duplicate:
    the same body again.
    """
    first_file: dict[str, str] = {}
    for name, event in sample_events().items():
        bodies: dict[str, str] = {}
        for record in event["Records"]:
            envelope = parse_envelope(record["body"])  # SNS fan-out: the key is in the Message
            try:
                body = json.loads(envelope["Message"] if envelope else record["body"])
            except json.JSONDecodeError:
                continue  # the poison sample has no key
            key = body.get("orderId") or body["paymentId"]
            assert bodies.setdefault(key, record["body"]) == record["body"], (name, key)
            assert first_file.setdefault(key, name) == name, (key, first_file[key], name)
