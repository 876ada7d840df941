"""Reading a Lambda stream event (Kinesis, DynamoDB Streams, Kafka) into the `SqsMessage`s the
state machine already reads, each with the position its batch response names.

A record's message id is its position in its shard or partition (the same on every retry),
its group is that shard or partition (so its records run in order and stop at the first
failure), and its body is its decoded data. Reading never raises: a malformed record becomes
a message with an empty id (reported, so the batch is retried) or with a body that is
unreadable (dead-lettered with the reason, its data kept).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from dataclasses import dataclass
from typing import Any

from exactly_once.sqs.messages import (
    PACKED_ATTRIBUTE,
    REPLAY_NONCE_ATTRIBUTE,
    SqsMessage,
    is_attribute_name,
)
from exactly_once.streams.images import UnreadableImage, image_json

PARTITION_KEY = "partition-key"
"""The attribute holding a Kinesis record's partitionKey or a Kafka record's key:
`key="attribute:partition-key"`."""

KAFKA_SOURCES = ("aws:kafka", "SelfManagedKafka")
RESERVED = frozenset({PARTITION_KEY, PACKED_ATTRIBUTE, REPLAY_NONCE_ATTRIBUTE})
"""Header names that never become attributes: the record key's, and the layer's own. A stream
record is never a dead letter's replay, so a header cannot present a replay nonce or restore
attributes from a packed overflow (which could give a keyless record another's key)."""

Position = str | dict[str, Any]
"""What the batch response names: a sequence number, or Kafka's {"partition", "offset"}."""


@dataclass(frozen=True)
class StreamRecord:
    message: SqsMessage
    position: Position


def read_event(event: Any) -> list[StreamRecord] | None:
    """The event's records in delivery order, or None when it is no stream event at all."""
    if not isinstance(event, dict):
        return None
    if event.get("eventSource") in KAFKA_SOURCES or isinstance(event.get("records"), dict):
        return _kafka_event(event)
    records = event.get("Records")
    if not isinstance(records, list):
        return None
    return [_stream_record(record) for record in records]


def _stream_record(record: Any) -> StreamRecord:
    fields = record if isinstance(record, dict) else {}
    if fields.get("eventSource") == "aws:dynamodb" or isinstance(fields.get("dynamodb"), dict):
        return _dynamodb_record(record, fields)
    return _kinesis_record(record, fields)


def _kinesis_record(record: Any, fields: dict[str, Any]) -> StreamRecord:
    kinesis = _map(fields.get("kinesis"))
    sequence = _text(kinesis.get("sequenceNumber")) or ""
    arn = _text(fields.get("eventSourceARN"))
    body, unreadable = _decoded(kinesis.get("data"), "data")
    partition_key = _text(kinesis.get("partitionKey"))
    attributes = {}
    if partition_key is not None:
        attributes[PARTITION_KEY] = {"dataType": "String", "stringValue": partition_key}
    message = SqsMessage.of(
        record,
        sequence,
        body,
        attributes,
        event_source_arn=arn,
        # A batch comes from one shard: the stream is the group, not the shard id read from
        # eventID, which a damaged record would lack and so run past its shard's failure.
        group_id=arn or "",
        in_order=True,
        unreadable=unreadable,
    )
    return StreamRecord(message, sequence)


def _dynamodb_record(record: Any, fields: dict[str, Any]) -> StreamRecord:
    change = _map(fields.get("dynamodb"))
    sequence = _text(change.get("SequenceNumber")) or ""
    arn = _text(fields.get("eventSourceARN"))
    image = change.get("NewImage") or change.get("OldImage") or change.get("Keys")
    body: str | None
    unreadable: str | None = None
    try:
        body = image_json(image)
    except (UnreadableImage, RecursionError) as exc:
        body, unreadable = _as_sent(image), f"the record's image is not DynamoDB JSON: {exc}"
    # A batch comes from one shard, and the record does not name it: the stream is the group.
    message = SqsMessage.of(
        record,
        sequence,
        body,
        {},
        event_source_arn=arn,
        group_id=arn or "",
        in_order=True,
        unreadable=unreadable,
    )
    return StreamRecord(message, sequence)


def _kafka_event(event: dict[str, Any]) -> list[StreamRecord]:
    arn = _text(event.get("eventSourceArn"))
    batches = event.get("records")
    if not isinstance(batches, dict):  # no position to resume at: the batch fails whole
        return [_kafka_record(batches, "", arn)]
    out: list[StreamRecord] = []
    for name, records in batches.items():
        for record in records if isinstance(records, list) else [records]:
            out.append(_kafka_record(record, str(name), arn))
    return out


def _kafka_record(record: Any, batch_name: str, arn: str | None) -> StreamRecord:
    fields = _map(record)
    topic, partition, offset = fields.get("topic"), fields.get("partition"), fields.get("offset")
    if isinstance(topic, str) and _is_int(partition) and _is_int(offset):
        where = f"{topic}-{partition}"
        message_id = f"{where}:{offset}"
        position: Position = {"partition": where, "offset": offset}
    else:  # no position to name: reported with an empty id, so the batch is retried whole
        where, message_id, position = batch_name, "", ""
    body, unreadable = _decoded(fields.get("value"), "value")
    message = SqsMessage.of(
        record,
        message_id,
        body,
        _kafka_attributes(fields),
        event_source_arn=arn,
        group_id=where,
        in_order=True,
        unreadable=unreadable,
    )
    return StreamRecord(message, position)


def _kafka_attributes(fields: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Headers by name (text when UTF-8, else base64 binary; the first of a repeated name),
    and the record's key as PARTITION_KEY."""
    attributes: dict[str, dict[str, str]] = {}
    headers = fields.get("headers")
    for header in headers if isinstance(headers, list) else ():
        for name, value in _map(header).items():
            raw = _bytes(value)
            # Only names SQS accepts: a poison record's DLQ copy must be sendable (the header
            # stays in ctx.record either way).
            if (
                isinstance(name, str)
                and is_attribute_name(name)
                and raw
                and name not in attributes
                and name not in RESERVED
            ):
                attributes[name] = _attribute(raw)
    key = fields.get("key")
    if isinstance(key, str):
        with contextlib.suppress(binascii.Error, ValueError):
            attributes[PARTITION_KEY] = _attribute(base64.b64decode(key, validate=True))
    return attributes


def _attribute(raw: bytes) -> dict[str, str]:
    try:
        return {"dataType": "String", "stringValue": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"dataType": "Binary", "binaryValue": base64.b64encode(raw).decode("ascii")}


def _decoded(data: Any, field: str) -> tuple[str | None, str | None]:
    """(body, why it is unreadable). Undecodable data is kept as it arrived (base64 text), so
    the dead-letter copy holds it."""
    if data is None:
        return None, f"the record has no {field}"
    if not isinstance(data, str):
        return None, f"the record's {field} is not base64 text ({type(data).__name__})"
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data, f"the record's {field} is not base64"
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return data, f"the record's {field} is not UTF-8 text (kept as base64)"


def _as_sent(value: Any) -> str | None:
    """What arrived, as JSON text, for the dead-letter copy of a record that cannot be read."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return None


def _bytes(value: Any) -> bytes | None:
    if isinstance(value, list) and all(_is_int(b) and 0 <= b <= 255 for b in value):
        return bytes(value)
    return None  # Lambda gives a header value as a list of byte values; nothing else


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _map(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
