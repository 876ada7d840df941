"""Lambda SQS events shaped exactly like the ones Lambda's event source mapping delivers.

Used to write the committed `events/*.json`, by the `event` CLI command, and by tests that
invoke handlers directly. Checksums are real (md5 of the body, SQS's md5 of the attributes).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"
SENDER_ID = "AIDAEXAMPLEEXAMPLE0ID"
SAMPLE_TIMESTAMP_MS = 1_767_225_600_000
"""2026-01-01T00:00:00Z: fixed so regenerating the committed samples is reproducible."""
_ID_NAMESPACE = uuid.UUID("6f1d3c1e-4c7b-4d0a-9a55-3f2b8f0c9e21")


@dataclass(frozen=True)
class Attr:
    """A message attribute with an explicit SQS data type (`Number.int`, `Binary`, ...)."""

    data_type: str
    value: str | bytes


AttributeValue = str | int | float | bytes | Attr
Attributes = Mapping[str, AttributeValue]


def typed(value: AttributeValue) -> Attr:
    """str -> String, int/float -> Number, bytes -> Binary; an Attr stays as it is."""
    if isinstance(value, Attr):
        return value
    if isinstance(value, bytes):
        return Attr("Binary", value)
    if isinstance(value, bool):
        raise TypeError("booleans have no SQS attribute type; use a String")
    if isinstance(value, int | float):
        return Attr("Number", str(value))
    return Attr("String", value)


def md5_of_attributes(attributes: Attributes) -> str:
    """SQS's MD5OfMessageAttributes: over the attributes sorted by name, each encoded as
    length-prefixed name, data type, a transport byte (1 string/number, 2 binary) and value.
    """
    digest = hashlib.md5(usedforsecurity=False)

    def put(data: bytes) -> None:
        digest.update(struct.pack(">I", len(data)) + data)

    for name in sorted(attributes):
        attr = typed(attributes[name])
        put(name.encode())
        put(attr.data_type.encode())
        raw = attr.value if isinstance(attr.value, bytes) else attr.value.encode()
        digest.update(bytes([2 if isinstance(attr.value, bytes) else 1]))
        put(raw)
    return digest.hexdigest()


def lambda_attribute(value: AttributeValue) -> dict[str, Any]:
    """One entry of a record's `messageAttributes`, with Lambda's camelCase keys."""
    attr = typed(value)
    entry: dict[str, Any] = {}
    if isinstance(attr.value, bytes):
        entry["binaryValue"] = base64.b64encode(attr.value).decode("ascii")
    else:
        entry["stringValue"] = attr.value
    entry.update({"stringListValues": [], "binaryListValues": [], "dataType": attr.data_type})
    return entry


def _receipt_handle(message_id: str) -> str:
    """Opaque, long and base64 like a real receipt handle; derived so samples are stable."""
    seed = message_id.encode()
    raw = hashlib.sha512(seed).digest() + hashlib.sha256(seed).digest()
    return "AQEB" + base64.b64encode(raw).decode("ascii")


def _per_message(
    value: Attributes | Sequence[Attributes] | None, count: int
) -> list[Mapping[str, AttributeValue]]:
    if value is None:
        return [{} for _ in range(count)]
    if isinstance(value, Mapping):
        return [value for _ in range(count)]
    if len(value) != count:
        raise ValueError(f"{len(value)} attribute sets for {count} bodies")
    return list(value)


def _per_message_ids(value: str | Sequence[str] | None, count: int, what: str) -> list[str | None]:
    if value is None or isinstance(value, str):
        return [value for _ in range(count)]
    if len(value) != count:
        raise ValueError(f"{len(value)} {what} for {count} bodies")
    return list(value)


def sqs_event(
    bodies: Sequence[str],
    *,
    queue_name: str = "orders-queue",
    fifo: bool | None = None,
    group_ids: str | Sequence[str] | None = None,
    dedup_ids: str | Sequence[str] | None = None,
    attributes: Attributes | Sequence[Attributes] | None = None,
    receive_count: int = 1,
    sent_timestamp_ms: int | None = None,
    region: str = REGION,
    account_id: str = ACCOUNT_ID,
) -> dict[str, Any]:
    """A Lambda SQS event with one record per body.

    `fifo` defaults to whether the queue name ends in `.fifo`; FIFO records need group ids
    (one for all, or one per body) and get content-based dedup ids unless given.
    `attributes` is one mapping for every record or one per body. Without a timestamp the
    current time is used; with one, ids are stable for the same inputs.
    """
    is_fifo = queue_name.endswith(".fifo") if fifo is None else fifo
    if is_fifo and not queue_name.endswith(".fifo"):
        raise ValueError("a FIFO queue's name must end in .fifo")
    count = len(bodies)
    groups = _per_message_ids(group_ids, count, "group ids")
    if is_fifo and any(group is None for group in groups):
        raise ValueError("FIFO records need a MessageGroupId")
    dedups = _per_message_ids(dedup_ids, count, "dedup ids")
    attribute_sets = _per_message(attributes, count)
    sent = int(time.time() * 1000) if sent_timestamp_ms is None else sent_timestamp_ms
    arn = f"arn:aws:sqs:{region}:{account_id}:{queue_name}"
    records: list[dict[str, Any]] = []
    for index, body in enumerate(bodies):
        message_id = str(uuid.uuid5(_ID_NAMESPACE, f"{arn}|{sent}|{index}|{body}"))
        system: dict[str, str] = {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": str(sent + index),
        }
        if is_fifo:
            system["SequenceNumber"] = f"{sent:013d}{index:07d}"
            system["MessageGroupId"] = str(groups[index])
        system["SenderId"] = SENDER_ID
        if is_fifo:
            system["MessageDeduplicationId"] = (
                dedups[index] or hashlib.sha256(body.encode()).hexdigest()
            )
        system["ApproximateFirstReceiveTimestamp"] = str(sent + index + 25)
        record: dict[str, Any] = {
            "messageId": message_id,
            "receiptHandle": _receipt_handle(message_id),
            "body": body,
            "attributes": system,
            "messageAttributes": {
                name: lambda_attribute(value) for name, value in attribute_sets[index].items()
            },
        }
        if attribute_sets[index]:
            record["md5OfMessageAttributes"] = md5_of_attributes(attribute_sets[index])
        record.update(
            {
                "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": region,
            }
        )
        records.append(record)
    return {"Records": records}


def _order(order_id: str, amount: int, customer: str) -> str:
    return json.dumps({"orderId": order_id, "amount": amount, "customerId": customer})


def _payment(payment_id: str, account: str, amount: int) -> str:
    return json.dumps(
        {"paymentId": payment_id, "accountId": account, "amount": amount, "currency": "EUR"}
    )


def sample_events() -> dict[str, dict[str, Any]]:
    """The committed sample events, by file name.

    Each file has business ids of its own (o-1xxx, o-2xxx, ...), so invoking them in any order
    never reuses a key for a different payload, which the layer would dead-letter as a
    FingerprintMismatch. Repeats inside orders-batch-duplicates.json are deliberate: the same
    id with the same body, a duplicate delivery; so are the two records of
    orders-sns-envelope.json (one SNS message delivered to the queue twice).
    """
    from exactly_once_ops.sample_sns_events import fanout_envelope

    ts = SAMPLE_TIMESTAMP_MS
    fanout = json.dumps(fanout_envelope(), indent=2)
    batch_ids = ["o-2001", "o-2002", "o-2001", "o-2003", "o-2004", "o-2002", "o-2005", "o-2006"]
    batch_ids += ["o-2001", "o-2007"]
    payments = [
        ("p-2001", "acct-17", 120),
        ("p-3001", "acct-42", 15),
        ("p-2002", "acct-17", 80),
        ("p-3002", "acct-42", 60),
        ("p-2003", "acct-17", 5),
    ]
    return {
        "orders-single.json": sqs_event(
            [_order("o-1001", 25, "c-7")], queue_name="orders-queue", sent_timestamp_ms=ts
        ),
        "orders-batch-duplicates.json": sqs_event(
            # a duplicate is the same message again: same id, same body (a different body under
            # the same key is a reused key, which the layer dead-letters as a fingerprint mismatch)
            [_order(order, int(order[-2:]) + 10, f"c-{int(order[-1]) % 3}") for order in batch_ids],
            queue_name="orders-queue",
            sent_timestamp_ms=ts,
        ),
        "payments-fifo-two-groups.json": sqs_event(
            [_payment(pid, account, amount) for pid, account, amount in payments],
            queue_name="payments-queue.fifo",
            group_ids=[account for _, account, _ in payments],
            sent_timestamp_ms=ts,
        ),
        "orders-poison.json": sqs_event(
            ["orderId=o-3001;amount=12 (not JSON)"], queue_name="orders-queue", sent_timestamp_ms=ts
        ),
        "orders-message-attributes.json": sqs_event(
            [_order("o-4001", 42, "c-1")],
            queue_name="orders-queue",
            attributes={"source": "checkout", "priority": 2, "weight": Attr("Number.float", "0.5")},
            sent_timestamp_ms=ts,
        ),
        # SNS fan-out: the orders queue is subscribed to the Sales topic, so a body is the SNS
        # envelope; here SNS delivered the same message (same MessageId) twice
        "orders-sns-envelope.json": sqs_event(
            [fanout, fanout], queue_name="orders-queue", sent_timestamp_ms=ts
        ),
    }


def render(event: Mapping[str, Any]) -> str:
    """The exact text of a committed event file."""
    return json.dumps(event, indent=2) + "\n"


def write_samples(directory: Path) -> list[Path]:
    """(Re)write the sample events; returns the files written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    from exactly_once_ops.sample_api_events import api_sample_events
    from exactly_once_ops.sample_sns_events import sns_sample_events
    from exactly_once_ops.sample_stream_events import stream_sample_events

    samples = {
        **sample_events(),
        **api_sample_events(),
        **sns_sample_events(),
        **stream_sample_events(),
    }
    for name, event in samples.items():
        path = directory / name
        path.write_text(render(event), encoding="utf-8")
        written.append(path)
    return written
