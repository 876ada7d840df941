"""Dead-lettering and replaying: hostile reasons, ten attributes, forged replays, bad packing.

moto (5.2) enforces neither SQS's ten-attribute limit, nor its character set for attribute
values, nor the size of the attributes (it checks only the body against 1 MiB), so every
message is also checked with `sqs_violations`, written from the SQS rules.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

from exactly_once.sqs.dead_letter import (
    MAX_MESSAGE_BYTES,
    TRUNCATED,
    failure_attributes,
    send_to_dead_letter_queue,
)
from exactly_once.sqs.messages import NonJsonBody, SqsMessage, parse_body
from exactly_once.stores.records import ErrorInfo
from exactly_once_ops.replay import MessageFilter, replay_message
from exactly_once_ops.send import send_batch
from local_aws.poller import to_lambda_record
from tests.consumer.conftest import Queues, drain, sqs_record

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

ARN = "arn:aws:sqs:us-east-1:123456789012:orders"
NONCE = "3f1c2a9e8b7d4c6f"

# -- SQS's rules, independent of the code under test --------------------------------------

VALID_TEXT = re.compile("[\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*")
INVALID_CHARACTER = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
ATTRIBUTE_NAME = re.compile(r"(?!\.)(?!(?i:aws|amazon)\.)(?!.*\.\.)[A-Za-z0-9_.\-]{1,256}(?<!\.)")
FIFO_ID = re.compile(r"[\x21-\x7e]{1,128}")


def utf8_size(text: str) -> int | None:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def sqs_violations(
    body: str, attributes: Mapping[str, Mapping[str, Any]], max_bytes: int = MAX_MESSAGE_BYTES
) -> list[str]:
    """What SQS would reject in a SendMessage with this body and these attributes."""
    problems: list[str] = []
    if len(attributes) > 10:
        problems.append(f"{len(attributes)} attributes")
    texts = {"body": body}
    size = 0
    for name, attribute in attributes.items():
        if not ATTRIBUTE_NAME.fullmatch(name):
            problems.append(f"attribute name {name!r}")
        data_type = attribute["DataType"]
        if data_type.split(".", 1)[0] not in ("String", "Number", "Binary"):
            problems.append(f"{name}: data type {data_type!r}")
        texts[f"{name} (type)"] = data_type
        if "BinaryValue" in attribute:
            size += len(attribute["BinaryValue"])
        else:
            texts[f"{name} (value)"] = attribute["StringValue"]
        size += utf8_size(name) or 0
    for where, text in texts.items():
        if text == "":
            problems.append(f"{where} is empty")
        if not VALID_TEXT.fullmatch(text) or utf8_size(text) is None:
            problems.append(f"{where} has characters SQS rejects")
        size += utf8_size(text) or 0
    if size > max_bytes:
        problems.append(f"{size} bytes > {max_bytes}")
    return problems


# -- helpers -----------------------------------------------------------------------------


def ten_originals() -> dict[str, dict[str, Any]]:
    """Lambda-event attributes: String, Number and Binary, the key last."""
    attributes: dict[str, dict[str, Any]] = {
        f"a{n}": {"stringValue": f"value-{n}", "dataType": "String"} for n in range(7)
    }
    attributes["amount"] = {"stringValue": "12.50", "dataType": "Number"}
    blob = base64.b64encode(b"\x00\x01\xff").decode("ascii")
    attributes["blob"] = {"binaryValue": blob, "dataType": "Binary"}
    attributes["tenant"] = {"stringValue": "acme", "dataType": "String.tenant"}
    return attributes


def with_attributes(record: dict[str, Any], attributes: dict[str, dict[str, Any]]) -> None:
    record["messageAttributes"] = {
        name: {"stringListValues": [], "binaryListValues": [], **value}
        for name, value in attributes.items()
    }


def essentials(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """name -> (data type, value), whatever else the form carries."""
    return {
        name: (a["dataType"], a.get("stringValue") or a.get("binaryValue") or "")
        for name, a in attributes.items()
    }


def read(record: Any) -> SqsMessage:
    """The record as the layer reads it, once, at the entry."""
    return SqsMessage.from_record(record)


def received_one(sqs: SQSClient, url: str) -> Any:
    [message] = drain(sqs, url)
    return message


def error(message: str, type_: str = "PermanentError") -> ErrorInfo:
    return ErrorInfo(type_, message, retryable=False)


def reason_of(attributes: Mapping[str, Mapping[str, Any]]) -> str:
    if "eo-error-message" in attributes:
        return str(attributes["eo-error-message"]["StringValue"])
    return str(json.loads(attributes["eo-failure"]["StringValue"])["eo-error-message"])


# -- C. a hostile reason never makes the send fail ----------------------------------------

HOSTILE = {
    "lone-surrogate": "cut inside an emoji: \ud83d, and a low one \udc00",
    "control-characters": "nul \x00, bell \x07, escape \x1b, \ufffe \uffff",
    "300-KB-ascii": "x" * 300_000,
    "300-KB-emoji": "\U0001f600" * 75_000,  # 4 UTF-8 bytes, 12 once JSON-escaped
}


@pytest.mark.parametrize("reason", HOSTILE.values(), ids=HOSTILE.keys())
@pytest.mark.parametrize("originals", [0, 10], ids=["plain", "packed"])
def test_a_hostile_reason_is_made_valid_and_fits(
    sqs: SQSClient, queues: Queues, reason: str, originals: int
) -> None:
    record = sqs_record({"orderId": "o-1", "pad": "p" * 100_000})
    with_attributes(record, dict(list(ten_originals().items())[:originals]))
    attributes = failure_attributes(read(record), error(reason), "orders", 1, NONCE)
    assert sqs_violations(record["body"], attributes) == []

    send_to_dead_letter_queue(sqs, queues.dlq_url, read(record), error(reason), "orders", 1, NONCE)
    message = received_one(sqs, queues.dlq_url)
    assert message["Body"] == record["body"]
    assert sqs_violations(message["Body"], message["MessageAttributes"]) == []
    sent, valid = reason_of(message["MessageAttributes"]), INVALID_CHARACTER.sub("\ufffd", reason)
    assert sent == valid or (sent.endswith(TRUNCATED) and valid.startswith(sent[: -len(TRUNCATED)]))
    replayed = to_lambda_record(message, queues.source_arn, "us-east-1")
    assert read(replayed).replay_nonce == NONCE


def test_the_size_limit_can_be_overridden() -> None:
    record = sqs_record({"orderId": "o-1"})
    attributes = failure_attributes(
        read(record), error("y" * 10_000), "orders", 1, max_message_bytes=2_000
    )
    assert sqs_violations(record["body"], attributes, max_bytes=2_000) == []
    assert reason_of(attributes).endswith(TRUNCATED)
    assert reason_of(attributes).startswith("y" * 1_000)


def test_an_empty_reason_and_fields_are_never_sent_empty() -> None:
    record = sqs_record({"orderId": "o-1"})
    record["messageId"] = ""
    attributes = failure_attributes(read(record), error("", type_=""), "", 0)
    assert sqs_violations(record["body"], attributes) == []


def test_an_invalid_body_is_sanitised_and_an_ordinary_one_sent_byte_for_byte(
    sqs: SQSClient, queues: Queues
) -> None:
    ordinary = sqs_record('{"orderId": "o-1", "note": "héllo \U0001f600 \\ud83d\\n\\t"}\n')
    broken = sqs_record({"orderId": "o-2"})
    broken["body"] = '{"orderId": "o-2", "note": "\ud83d \x00"}'  # a Python str can hold these
    for record in (ordinary, broken):
        send_to_dead_letter_queue(sqs, queues.dlq_url, read(record), error("bad"), "orders", 1)
    by_id = {
        m["MessageAttributes"]["eo-original-message-id"]["StringValue"]: m
        for m in drain(sqs, queues.dlq_url)
    }
    sent = by_id[ordinary["messageId"]]
    assert sent["Body"] == ordinary["body"]
    expected_md5 = hashlib.md5(ordinary["body"].encode(), usedforsecurity=False).hexdigest()
    assert sent["MD5OfBody"] == expected_md5
    assert by_id[broken["messageId"]]["Body"] == '{"orderId": "o-2", "note": "\ufffd \ufffd"}'


def test_fifo_group_and_deduplication_ids_are_made_valid(
    sqs: SQSClient, fifo_queues: Queues
) -> None:
    fifo_arn = "arn:aws:sqs:us-east-1:123456789012:payments.fifo"
    valid = sqs_record({"id": "p-1"}, arn=fifo_arn, group_id="acct-1")
    hostile = sqs_record({"id": "p-2"}, arn=fifo_arn, group_id="acct 2 ü\ud83d")
    hostile["attributes"]["MessageDeduplicationId"] = "d" * 200
    for record in (valid, hostile):
        send_to_dead_letter_queue(sqs, fifo_queues.dlq_url, read(record), error("no"), "pay", 1)
    sent = {
        m["MessageAttributes"]["eo-original-message-id"]["StringValue"]: m["Attributes"]
        for m in drain(sqs, fifo_queues.dlq_url)
    }
    assert sent[valid["messageId"]]["MessageGroupId"] == "acct-1"
    assert (
        sent[valid["messageId"]]["MessageDeduplicationId"]
        == valid["attributes"]["MessageDeduplicationId"]
    )
    for ids in sent.values():
        assert FIFO_ID.fullmatch(ids["MessageGroupId"])
        assert FIFO_ID.fullmatch(ids["MessageDeduplicationId"])


# -- B. ten attributes survive the DLQ, a replay, and being dead-lettered again ------------


def replay_through_the_source(sqs: SQSClient, queues: Queues, dead: Any) -> dict[str, Any]:
    """What copy-mode replay sends, received by the consumer as a Lambda record."""
    outgoing = replay_message(dead, fifo_destination=False)
    assert dict(outgoing.attributes) == {
        name: {k: v for k, v in value.items() if k in ("DataType", "StringValue", "BinaryValue")}
        for name, value in dead["MessageAttributes"].items()
    }  # carried through unchanged: the nonce and the packed originals too
    _, failed = send_batch(sqs, queues.source_url, [("0", outgoing)])
    assert failed == []
    [received] = drain(sqs, queues.source_url)
    return to_lambda_record(received, queues.source_arn, "us-east-1")


def test_a_ten_attribute_message_keeps_every_original_through_replays(
    sqs: SQSClient, queues: Queues
) -> None:
    originals = ten_originals()
    record = sqs_record({"orderId": "o-10"}, arn=queues.source_arn)
    with_attributes(record, originals)

    for round_, nonce in enumerate(["n-first", "n-second", "n-third"]):
        failure = error(f"failure {round_}")
        send_to_dead_letter_queue(sqs, queues.dlq_url, read(record), failure, "orders", 1, nonce)
        dead = received_one(sqs, queues.dlq_url)
        assert sqs_violations(dead["Body"], dead["MessageAttributes"]) == []
        assert len(dead["MessageAttributes"]) == 10
        assert "eo-failure" in dead["MessageAttributes"]

        record = replay_through_the_source(sqs, queues, dead)
        restored = read(record).message_attributes
        assert {n: v for n, v in essentials(restored).items() if not n.startswith("eo-")} == (
            essentials(originals)
        )
        assert read(record).replay_nonce == nonce  # this failure's, not a stale one
        packed = json.loads(restored["eo-failure"]["stringValue"])
        assert packed["eo-error-message"] == f"failure {round_}"


def test_a_replayed_message_the_consumer_reads_directly_from_the_dlq(
    sqs: SQSClient, queues: Queues
) -> None:
    """The native move task keeps attributes as they are: same result as copy mode."""
    record = sqs_record({"orderId": "o-11"})
    with_attributes(record, ten_originals())
    send_to_dead_letter_queue(sqs, queues.dlq_url, read(record), error("x"), "orders", 2, NONCE)
    dead = received_one(sqs, queues.dlq_url)
    replayed = to_lambda_record(dead, queues.source_arn, "us-east-1")
    assert read(replayed).message_attributes["tenant"]["stringValue"] == "acme"
    assert read(replayed).replay_nonce == NONCE


def test_plain_attributes_are_unchanged_and_carry_the_nonce() -> None:
    record = sqs_record({"orderId": "o-1"}, attributes={"tenant": "acme"})
    attributes = failure_attributes(read(record), error("card declined"), "orders", 1, NONCE)
    assert {name: value["StringValue"] for name, value in attributes.items()} == {
        "tenant": "acme",
        "eo-error-type": "PermanentError",
        "eo-error-message": "card declined",
        "eo-consumer": "orders",
        "eo-original-message-id": record["messageId"],
        "eo-attempt": "1",
        "eo-replay-nonce": NONCE,
    }
    assert "eo-replay-nonce" not in failure_attributes(read(record), error("x"), "orders", 1)


def test_a_producers_own_eo_attribute_is_an_original_and_kept() -> None:
    record = sqs_record({"orderId": "o-1"}, attributes={"eo-region": "eu"})
    attributes = failure_attributes(read(record), error("x"), "orders", 1, NONCE)
    assert attributes["eo-region"] == {"DataType": "String", "StringValue": "eu"}


def test_replay_copy_filters_see_packed_reasons_and_originals(
    sqs: SQSClient, queues: Queues
) -> None:
    record = sqs_record({"orderId": "o-12"})
    with_attributes(record, ten_originals())
    send_to_dead_letter_queue(sqs, queues.dlq_url, read(record), error("x"), "orders", 1, NONCE)
    dead = received_one(sqs, queues.dlq_url)
    packed = json.loads(dead["MessageAttributes"]["eo-failure"]["StringValue"])
    [(name, value)] = packed["eo-overflow-attributes"].items()

    assert MessageFilter(error_types=["PermanentError"]).matches(dead)
    assert not MessageFilter(error_types=["Timeout"]).matches(dead)
    wanted = value.get("stringValue") or value["binaryValue"]  # as `--match-attribute` spells it
    assert MessageFilter(attributes={name: wanted}).matches(dead)


# -- A. only the nonce makes a replay ------------------------------------------------------


@pytest.mark.parametrize(
    "attributes",
    [
        {"eo-region": "eu"},
        {"eo-error-type": "PermanentError", "eo-attempt": "1"},
        {"eo-failure": '{"eo-error-type": "PermanentError"}'},
        {"eo-replay-nonce": ""},
        {"eo-replay-nonce": "not a token"},
        {"eo-replay-nonce": "\ud83d"},
    ],
)
def test_eo_attributes_without_a_nonce_are_not_a_replay(attributes: dict[str, str]) -> None:
    assert read(sqs_record({"orderId": "o-1"}, attributes=attributes)).replay_nonce is None


def test_the_nonce_is_read_plain_or_packed() -> None:
    plain = sqs_record({"orderId": "o-1"}, attributes={"eo-replay-nonce": NONCE})
    packed = sqs_record(
        {"orderId": "o-1"}, attributes={"eo-failure": json.dumps({"eo-replay-nonce": NONCE})}
    )
    assert read(plain).replay_nonce == read(packed).replay_nonce == NONCE


# -- malformed records and packing never raise ---------------------------------------------

GOOD_OVERFLOW = {"kept": {"dataType": "String", "stringValue": "yes"}}
MALFORMED_PACKED = [
    "not json",
    "[1, 2]",
    "null",
    "[" * 100_000,
    '{"eo-replay-nonce": 5, "eo-overflow-attributes": [1]}',
    '{"eo-overflow-attributes": "x"}',
    json.dumps(
        {
            "eo-overflow-attributes": {
                **GOOD_OVERFLOW,
                "n": 1,
                "no-type": {"stringValue": "v"},
                "bad-type": {"dataType": 5, "stringValue": "v"},
                "bad name!": {"dataType": "String", "stringValue": "v"},
                "AWS.reserved": {"dataType": "String", "stringValue": "v"},
                "nan": {"dataType": "Number", "stringValue": "abc"},
                "blob": {"dataType": "Binary", "binaryValue": "!!not base64"},
                "empty": {"dataType": "String", "stringValue": ""},
                "surrogate": {"dataType": "String", "stringValue": "\ud83d"},
                "kind": {"dataType": "Nonsense", "stringValue": "v"},
            }
        }
    ),
]


@pytest.mark.parametrize("packed", MALFORMED_PACKED)
def test_a_malformed_packed_attribute_never_raises(
    sqs: SQSClient, queues: Queues, packed: str
) -> None:
    record = sqs_record({"orderId": "o-1"}, attributes={"tenant": "acme", "eo-failure": packed})
    assert read(record).replay_nonce is None
    restored = read(record).message_attributes
    expected = {"tenant", "eo-failure"} | ({"kept"} if '"kept"' in packed else set())
    assert set(restored) == expected  # the one well-formed packed original, nothing else
    attributes = failure_attributes(read(record), error("x"), "orders", 1, NONCE)
    assert sqs_violations(record["body"], attributes) == []
    send_to_dead_letter_queue(sqs, queues.dlq_url, read(record), error("x"), "orders", 1, NONCE)
    sent = received_one(sqs, queues.dlq_url)["MessageAttributes"]
    assert expected - {"eo-failure"} <= set(sent)


@pytest.mark.parametrize(
    "record",
    [
        None,
        "x",
        [],
        {},
        {"messageAttributes": None},
        {"messageAttributes": "x"},
        {"messageAttributes": []},
        {"messageAttributes": {"eo-failure": "x", 1: {}, "a": None}},
        {"messageAttributes": {"eo-failure": {"stringValue": 7}}},
        {"messageAttributes": {"eo-replay-nonce": {"stringValue": ["x"]}}},
    ],
)
def test_malformed_records_never_raise(record: Any) -> None:
    assert read(record).replay_nonce is None
    assert isinstance(read(record).message_attributes, dict)
    if isinstance(record, dict):
        attributes = failure_attributes(read(record), error("x"), "orders", 1, NONCE)
        assert sqs_violations("(empty body)", attributes) == []


def test_json_nested_too_deeply_is_not_json() -> None:
    with pytest.raises(NonJsonBody):
        parse_body(read({"body": "[" * 100_000 + "]" * 100_000}), raw=False)
