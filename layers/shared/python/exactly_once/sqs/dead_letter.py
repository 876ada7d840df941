"""Send a poison message straight to the DLQ, with attributes that say why.

SQS's own redrive would only move it after maxReceiveCount wasted deliveries and would carry
no reason; sending it ourselves is immediate and leaves the reason on the message. What we add
must never be why that send fails (the record would then be retried, failing the same way):
every value we build is made valid for SQS, and the reason is cut to fit the message size.
A body near SQS's 1 MiB limit that leaves no room even for the attributes tools need is not
sent at all (DeadLetterTooLarge): the record is reported failed, and SQS's redrive moves it.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from exactly_once.sqs.messages import (
    OVERFLOW_KEY,
    PACKED_ATTRIBUTE,
    REPLAY_NONCE_ATTRIBUTE,
    SqsMessage,
    is_base64,
)
from exactly_once.stores.codec import sanitise, sha256_hex, utf8
from exactly_once.stores.records import ErrorInfo

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_ATTRIBUTES = 10  # SQS's limit per message
MAX_MESSAGE_BYTES = 1_048_576
"""SQS's limit (1 MiB since 2025, as the Lambda SQS event source's), counted as SQS does: the
body plus each attribute's name, data type and value, in UTF-8 bytes. Not a setting: the CDK
gives every source queue and DLQ this size, since a DLQ must accept whatever its source queue
accepts. A DLQ set smaller rejects an over-size send, and the record is then reported failed
(never dropped), so SQS's own redrive moves it after maxReceiveCount."""
MAX_FIELD_CHARS = 1024  # our values other than the reason: types, names, ids
TRUNCATED = "… (truncated)"

ERROR_TYPE = "eo-error-type"
ERROR_MESSAGE = "eo-error-message"
CONSUMER = "eo-consumer"
ORIGINAL_MESSAGE_ID = "eo-original-message-id"
ATTEMPT = "eo-attempt"
LAYER_ATTRIBUTES = frozenset(
    {
        ERROR_TYPE,
        ERROR_MESSAGE,
        CONSUMER,
        ORIGINAL_MESSAGE_ID,
        ATTEMPT,
        REPLAY_NONCE_ATTRIBUTE,
        PACKED_ATTRIBUTE,
    }
)
"""Ours, rebuilt on every dead-lettering (a replayed message's old reasons are stale). Any other
attribute, `eo-`-prefixed or not, is the producer's and is kept."""

_FIFO_ID = re.compile(r"[\x21-\x7e]{1,128}")  # what SQS accepts as a group or deduplication id


class DeadLetterTooLarge(ValueError):
    """The body, the producer's attributes and our machine-read attributes alone are over the
    limit: the send is not tried (SQS would refuse it), and the caller reports the record
    failed so that SQS's own redrive moves it, body and attributes intact."""


def failure_attributes(
    message: SqsMessage,
    error: ErrorInfo,
    consumer: str,
    attempt: int,
    replay_nonce: str | None = None,
    *,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> dict[str, dict[str, Any]]:
    """The original attributes plus ours, within SQS's ten attributes and `max_message_bytes`.

    When they don't fit, ours collapse into one JSON attribute (`eo-failure`) and the originals
    that still don't fit travel inside it, so nothing is lost: `SqsMessage.from_record`
    restores them after a replay, including those an earlier dead-lettering packed. The body
    and the originals are never cut. What gives way, first to last: the reason (cut, then
    left out), then `eo-attempt` and `eo-consumer` (for people). What tools read stays: the
    replay nonce (the only way to re-run the failure), `eo-original-message-id` (replay's loop
    guard) and `eo-error-type` (replay's filter). Raises DeadLetterTooLarge when even those
    don't fit; a body that SQS accepted leaves room for them unless it was within a few hundred
    bytes of the limit.
    """
    originals = _originals(message)
    machine = {
        ERROR_TYPE: _field(error.type),
        ORIGINAL_MESSAGE_ID: _field(message.message_id),
    }
    if replay_nonce is not None:
        machine[REPLAY_NONCE_ATTRIBUTE] = _field(replay_nonce)
    human = {CONSUMER: _field(consumer), ATTEMPT: str(attempt)}
    reason = sanitise(error.message or "") or "(no message)"
    room = max_message_bytes - _utf8_size(_body(message))
    tries: list[tuple[dict[str, str], str | None]] = [
        ({**machine, **human}, reason),
        ({**machine, **human}, None),
        ({**machine, CONSUMER: human[CONSUMER]}, None),
        (machine, None),
    ]
    for ours, text in tries:
        attributes = _assemble(originals, ours, text, room)
        if attributes is not None:
            return attributes
    raise DeadLetterTooLarge(
        f"the body ({max_message_bytes - room} bytes) and the message's own attributes leave "
        f"no room for {sorted(machine)} within {max_message_bytes} bytes"
    )


def _assemble(
    originals: dict[str, dict[str, str]], ours: dict[str, str], reason: str | None, room: int
) -> dict[str, dict[str, Any]] | None:
    """`originals` and `ours` (with `reason`, cut to what is left of `room`), or None when
    they don't fit in `room` bytes even with the reason cut to its marker."""
    if reason is not None:
        ours = {**ours, ERROR_MESSAGE: ""}  # filled last, with the room that is left
    if len(originals) + len(ours) <= MAX_ATTRIBUTES:
        attributes = {name: _to_send(value) for name, value in originals.items()}
        attributes.update({name: _string(value) for name, value in ours.items()})
        room -= sum(_size(name, value) for name, value in attributes.items())
        if reason is not None:
            fitted = _fit(reason, room, _utf8_size)
            attributes[ERROR_MESSAGE] = _string(fitted)
            room -= _utf8_size(fitted)
        return attributes if room >= 0 else None

    # The largest originals stay as they are: packed, JSON escaping would only inflate them.
    by_size = sorted(originals, key=lambda n: _size(n, _to_send(originals[n])), reverse=True)
    keep = set(by_size[: MAX_ATTRIBUTES - 1])
    kept = {name: _to_send(value) for name, value in originals.items() if name in keep}
    packed: dict[str, Any] = dict(ours)
    overflow = {name: value for name, value in originals.items() if name not in kept}
    if overflow:
        packed[OVERFLOW_KEY] = overflow

    def encoded() -> str:
        return json.dumps(packed, ensure_ascii=True)  # ASCII: always a valid SQS string

    room -= sum(_size(name, value) for name, value in kept.items())
    room -= _size(PACKED_ATTRIBUTE, _string(encoded()))
    if reason is not None:
        fitted = _fit(reason, room, _json_size)
        packed[ERROR_MESSAGE] = fitted
        room -= _json_size(fitted)
    return {**kept, PACKED_ATTRIBUTE: _string(encoded())} if room >= 0 else None


def send_to_dead_letter_queue(
    sqs: SQSClient,
    queue_url: str,
    message: SqsMessage,
    error: ErrorInfo,
    consumer: str,
    attempt: int,
    replay_nonce: str | None = None,
    *,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> str:
    """Send the original body with its reason; returns the DLQ's message id.

    Raises on failure, DeadLetterTooLarge without trying when the message cannot fit: the
    caller then reports the record failed, so it is never dropped. A FIFO DLQ is told by its
    URL; a fair (standard) queue's MessageGroupId does not make its DLQ FIFO.
    """
    params: dict[str, Any] = {
        "QueueUrl": queue_url,
        "MessageBody": _body(message),
        "MessageAttributes": failure_attributes(
            message, error, consumer, attempt, replay_nonce, max_message_bytes=max_message_bytes
        ),
    }
    if queue_url.endswith(".fifo"):
        params["MessageGroupId"] = _fifo_id(message.group_id)
        params["MessageDeduplicationId"] = _fifo_id(message.deduplication_id or message.message_id)
    return str(sqs.send_message(**params)["MessageId"])


def _body(message: SqsMessage) -> str:
    """The body as received (an ordinary one is unchanged); SQS rejects an empty one."""
    return sanitise(message.body) if message.body else "(empty body)"


def _originals(message: SqsMessage) -> dict[str, dict[str, str]]:
    """The producer's attributes in event form, those packed by an earlier dead-lettering too.

    One without a usable value (only a malformed record has one) is left out rather than make
    the send fail.
    """
    out: dict[str, dict[str, str]] = {}
    for name, attribute in message.message_attributes.items():
        if name in LAYER_ATTRIBUTES:
            continue
        data_type = attribute.get("dataType")
        data_type = data_type if isinstance(data_type, str) and data_type else "String"
        binary, text = attribute.get("binaryValue"), attribute.get("stringValue")
        if isinstance(binary, str) and binary:
            if not is_base64(binary):
                continue
            out[name] = {"dataType": data_type, "binaryValue": binary}
        elif isinstance(text, str) and text:
            out[name] = {"dataType": data_type, "stringValue": sanitise(text)}
    return out


def _to_send(attribute: dict[str, str]) -> dict[str, Any]:
    """An event-form attribute (binary as base64) in SendMessage form."""
    if "binaryValue" in attribute:
        binary = base64.b64decode(attribute["binaryValue"])
        return {"DataType": attribute["dataType"], "BinaryValue": binary}
    return {"DataType": attribute["dataType"], "StringValue": attribute["stringValue"]}


def _string(value: str) -> dict[str, Any]:
    return {"DataType": "String", "StringValue": value}


def _field(value: Any) -> str:
    """One of our short values, valid for SQS and never empty (SQS rejects empty values)."""
    text = sanitise("" if value is None else str(value))[:MAX_FIELD_CHARS]
    return text or "(none)"


def _fifo_id(value: Any) -> str:
    """A valid group or deduplication id for `value`: itself when valid, else its digest."""
    text = "" if value is None else str(value)
    if not text:
        return "dead-letter"
    if _FIFO_ID.fullmatch(text):
        return text
    return sha256_hex(text)


def _fit(text: str, budget: int, cost: Callable[[str], int]) -> str:
    """`text`, or its longest prefix that, marked as truncated, costs at most `budget`.

    Never empty: with no room at all, the marker alone.
    """
    if cost(text) <= budget:
        return text
    low, high = 0, min(len(text), max(budget, 0))  # every character costs at least 1
    while low < high:
        middle = (low + high + 1) // 2
        if cost(text[:middle] + TRUNCATED) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + TRUNCATED


def _utf8_size(text: str) -> int:
    return len(utf8(text))


def _json_size(text: str) -> int:
    """What `text` adds inside the packed JSON (escaped, without its quotes)."""
    return len(json.dumps(text, ensure_ascii=True)) - 2


def _size(name: str, attribute: dict[str, Any]) -> int:
    """An attribute's share of the message size, as SQS counts it."""
    value = attribute.get("BinaryValue")
    value_size = len(value) if isinstance(value, bytes) else _utf8_size(attribute["StringValue"])
    return _utf8_size(name) + _utf8_size(attribute["DataType"]) + value_size
