"""The committed SNS samples and the SNS envelope sample are real-shaped and up to date, and
`event-samples` writes every committed sample."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.parser.models import SnsModel, SnsNotificationModel

from exactly_once_ops.sample_api_events import api_sample_events
from exactly_once_ops.sample_events import render, sample_events
from exactly_once_ops.sample_sns_events import sns_sample_events
from exactly_once_ops.sample_stream_events import stream_sample_events
from exactly_once_ops.sns_events import is_sns_event, lambda_sns_record, parse_envelope
from tests.cli.support import Invoke

EVENTS = Path(__file__).resolve().parents[2] / "events"
SNS_KEYS = {
    "Type",
    "MessageId",
    "TopicArn",
    "Subject",
    "Message",
    "Timestamp",
    "SignatureVersion",
    "Signature",
    "SigningCertUrl",
    "UnsubscribeUrl",
    "MessageAttributes",
}


def load(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((EVENTS / name).read_text(encoding="utf-8"))
    return document


def sns_of(name: str) -> dict[str, Any]:
    (record,) = load(name)["Records"]  # SNS invokes a subscriber with one record
    sns: dict[str, Any] = record["Sns"]
    return sns


@pytest.mark.parametrize("name", sorted(sns_sample_events()))
def test_committed_sns_sample_is_valid_and_up_to_date(name: str) -> None:
    text = (EVENTS / name).read_text(encoding="utf-8")
    assert text == render(sns_sample_events()[name]), "regenerate: eonce event-samples"
    event = json.loads(text)
    SnsModel.model_validate(event)
    assert is_sns_event(event)
    (record,) = event["Records"]
    assert set(record) == {"EventSource", "EventVersion", "EventSubscriptionArn", "Sns"}
    assert record["EventSource"] == "aws:sns"
    assert record["EventSubscriptionArn"].startswith(record["Sns"]["TopicArn"] + ":")
    assert set(record["Sns"]) == SNS_KEYS
    assert record["Sns"]["Timestamp"].endswith("Z")


def test_the_same_sale_published_twice_is_two_messages_with_one_order() -> None:
    first, second = (
        sns_of("sns-sale-published-twice-1.json"),
        sns_of("sns-sale-published-twice-2.json"),
    )
    assert first["MessageId"] != second["MessageId"]
    assert first["Timestamp"] != second["Timestamp"]
    assert first["Message"] == second["Message"]


def test_sns_sample_keys_are_their_own() -> None:
    """Each SNS sample has an orderId of its own (o-5xxx), apart from the queue samples' and
    the published-twice pair's shared one, so they can be invoked in any order."""
    keys: dict[str, str] = {}
    for name in sorted(sns_sample_events()):
        try:
            key = json.loads(sns_of(name)["Message"])["orderId"]
        except json.JSONDecodeError:
            continue  # the poison sample has no key
        assert key.startswith("o-5")
        owner = keys.setdefault(key, name)
        assert owner == name or {owner, name} == {
            "sns-sale-published-twice-1.json",
            "sns-sale-published-twice-2.json",
        }


def test_the_attribute_sample_carries_its_key_and_each_type() -> None:
    attributes = sns_of("sns-sale-attributes.json")["MessageAttributes"]
    assert attributes["orderId"] == {"Type": "String", "Value": "o-5101"}
    assert json.loads(sns_of("sns-sale-attributes.json")["Message"])["orderId"] == "o-5101"
    assert attributes["amount"] == {"Type": "Number", "Value": "42"}
    assert attributes["checksum"] == {"Type": "Binary", "Value": "AAFzYWxl"}


def test_the_poison_sample_is_not_json() -> None:
    with pytest.raises(json.JSONDecodeError, match="Expecting value"):
        json.loads(sns_of("sns-sale-poison.json")["Message"])


def test_the_fanout_sample_is_one_sns_message_delivered_to_the_queue_twice() -> None:
    records = load("orders-sns-envelope.json")["Records"]
    assert [r["eventSource"] for r in records] == ["aws:sqs", "aws:sqs"]
    assert records[0]["messageId"] != records[1]["messageId"]
    assert records[0]["body"] == records[1]["body"]
    envelope = parse_envelope(records[0]["body"])
    assert envelope is not None
    SnsNotificationModel.model_validate(dict(envelope))  # (it renames keys in place)
    assert {"SigningCertURL", "UnsubscribeURL"} <= set(envelope)
    assert json.loads(envelope["Message"])["orderId"] == "o-6001"
    # The same notification as a direct subscriber would get it.
    record = lambda_sns_record(envelope, "arn:aws:sns:us-east-1:123456789012:sales:sub")
    assert record["Sns"]["MessageId"] == envelope["MessageId"]
    assert record["Sns"]["SigningCertUrl"] == envelope["SigningCertURL"]


def test_event_samples_writes_every_committed_sample(cli: Invoke, tmp_path: Path) -> None:
    result = cli("event-samples", str(tmp_path))
    assert result.exit_code == 0, result.output
    expected = {
        **sample_events(),
        **api_sample_events(),
        **sns_sample_events(),
        **stream_sample_events(),
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(expected)
    for name in expected:
        assert (tmp_path / name).read_text() == (EVENTS / name).read_text()
