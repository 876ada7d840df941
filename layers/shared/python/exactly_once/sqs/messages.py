"""Reading a Lambda SQS event record, once, into a typed `SqsMessage`."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from exactly_once.errors import PermanentError
from exactly_once.stores.codec import INVALID_CHARS

REPLAY_NONCE_ATTRIBUTE = "eo-replay-nonce"
"""The FAILED record's random nonce, carried by its dead-lettered message. Only a delivery that
presents the nonce of the record's current failure is a replay: any producer can add `eo-*`
attributes, so their presence proves nothing."""
PACKED_ATTRIBUTE = "eo-failure"
"""One JSON attribute holding ours, and the originals that did not fit SQS's ten attributes."""
OVERFLOW_KEY = "eo-overflow-attributes"
"""Inside the packed JSON: the originals that did not fit, in Lambda event form."""

# What SQS itself would accept, so an attribute restored from (possibly forged) packed JSON can
# be sent again. Names: A-Za-z0-9_-. up to 256, no AWS./Amazon. prefix, no leading, trailing or
# repeated periods.
_NAME = re.compile(r"(?!\.)(?!aws\.)(?!amazon\.)(?!.*\.\.)[A-Za-z0-9_.\-]{1,256}(?<!\.)", re.I)
_DATA_TYPE = re.compile(r"(String|Number|Binary)(\.[\x21-\x7e]+)?")
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_NONCE = re.compile(r"[\x21-\x7e]{1,256}")  # the store's nonces are short printable ASCII


class NonJsonBody(PermanentError):
    """The body is not JSON and the consumer did not opt into raw bodies."""


@dataclass(frozen=True)
class SqsMessage:
    """One record of a Lambda SQS event, read once at the entry and passed on as it is.

    Reading never raises: a malformed record still becomes a message (its unusable fields
    empty), so every record reaches an outcome. Only the message id decides whether it is
    usable at all; what the body or key lacks is found later, and is permanent.
    """

    record: Any
    """As delivered: key functions and `ctx.record` see it; nothing else reads it again."""
    message_id: str
    """Empty when absent or not a string: the record is then malformed."""
    body: str | None
    """None when not a string."""
    receipt_handle: str | None
    event_source_arn: str | None
    group_id: str | None
    """MessageGroupId, as text: "" is a group too. A FIFO queue's ordering group, or on a
    standard queue a fair-queue tenant, which orders nothing: see `is_fifo`."""
    deduplication_id: str | None
    """MessageDeduplicationId (FIFO); None when absent or empty."""
    receive_count: int | None
    """ApproximateReceiveCount; None when absent or not a number."""
    message_attributes: Mapping[str, Mapping[str, Any]]
    """Lambda event form, with the originals an earlier dead-lettering packed restored."""
    replay_nonce: str | None
    """The nonce it presents (plain or packed) if well-formed: see REPLAY_NONCE_ATTRIBUTE."""
    in_order: bool = False
    """A stream record (streams/records.py): `group_id` is its shard or partition, whose
    records must run in order, as a FIFO group's do."""
    unreadable: str | None = None
    """Why the body could not be read as text (a stream record's data that is not base64 or
    not UTF-8); the body then keeps what arrived, so a DLQ copy loses nothing."""
    derived: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    """What the consumer worked out from it (body, key, fingerprint), kept so that grouping a
    batch by key and running the record parse the body once."""

    @classmethod
    def from_record(cls, record: Any) -> SqsMessage:
        fields = record if isinstance(record, dict) else {}
        system = fields.get("attributes")
        system = system if isinstance(system, dict) else {}
        group, deduplication = system.get("MessageGroupId"), system.get("MessageDeduplicationId")
        return cls.of(
            record,
            _text(fields.get("messageId")) or "",
            _text(fields.get("body")),
            fields.get("messageAttributes"),
            receipt_handle=_text(fields.get("receiptHandle")),
            event_source_arn=_text(fields.get("eventSourceARN")),
            group_id=str(group) if group is not None else None,
            deduplication_id=str(deduplication) if deduplication else None,
            receive_count=_count(system.get("ApproximateReceiveCount")),
        )

    @classmethod
    def of(
        cls,
        record: Any,
        message_id: str,
        body: str | None,
        attributes: Any,
        *,
        receipt_handle: str | None = None,
        event_source_arn: str | None = None,
        group_id: str | None = None,
        deduplication_id: str | None = None,
        receive_count: int | None = None,
        in_order: bool = False,
        unreadable: str | None = None,
    ) -> SqsMessage:
        """A message from its parts, `attributes` in Lambda's SQS event form: how an SNS
        notification (sns/messages.py, sqs/envelopes.py) becomes one for the same state machine."""
        own = _own_attributes(attributes)
        packed = _packed(own)
        return cls(
            record=record,
            message_id=message_id,
            body=body,
            receipt_handle=receipt_handle,
            event_source_arn=event_source_arn,
            group_id=group_id,
            deduplication_id=deduplication_id,
            receive_count=receive_count,
            message_attributes=_with_overflow(own, packed),
            replay_nonce=_replay_nonce(own, packed),
            in_order=in_order,
            unreadable=unreadable,
        )

    @property
    def is_fifo(self) -> bool:
        """The queue decides (a FIFO queue's name ends in .fifo), never a group id: standard
        queues accept a MessageGroupId for fairness between tenants (SQS fair queues)."""
        return (self.event_source_arn or "").endswith(".fifo")

    @property
    def ordered(self) -> bool:
        """Its group must run in order and stop at its first failure: a FIFO message group,
        or a stream's shard or partition."""
        return self.in_order or self.is_fifo


def parse_body(message: SqsMessage, raw: bool) -> Any:
    if message.unreadable is not None:
        raise NonJsonBody(message.unreadable)
    body = message.body
    if body is None:  # the reason names what was there instead
        found = message.record.get("body") if isinstance(message.record, dict) else None
        raise NonJsonBody(f"record has no string body (found {type(found).__name__})")
    if raw:
        return body
    try:
        return json.loads(body)
    except ValueError as exc:
        raise NonJsonBody(f"body is not JSON: {exc}") from exc
    except RecursionError as exc:  # "[[[[…" from a producer: poison, not a crash
        raise NonJsonBody("body is JSON nested too deeply to parse") from exc


def queue_url_from_arn(arn: str, endpoint_url: str) -> str:
    """arn:aws:sqs:REGION:ACCOUNT:NAME -> ENDPOINT/ACCOUNT/NAME (works for AWS and local)."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"not an SQS queue ARN: {arn!r}")
    return f"{endpoint_url.rstrip('/')}/{parts[4]}/{parts[5]}"


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    try:
        return int(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _own_attributes(attributes: Any) -> dict[str, dict[str, Any]]:
    """The attributes the message carries itself; what is not name -> map is left out."""
    if not isinstance(attributes, dict):
        return {}
    return {
        name: value
        for name, value in attributes.items()
        if isinstance(name, str) and isinstance(value, dict)
    }


def _replay_nonce(own: dict[str, dict[str, Any]], packed: dict[str, Any]) -> str | None:
    """The store compares it with the FAILED record's own nonce; a match is what makes a
    delivery a replay that may run a permanent failure again. Anything but a short
    printable-ASCII token is malformed (and would only be a guess): None, so it never reaches
    a store condition. Read before the overflow is restored, which may not supply it.
    """
    nonce = _string_value(own.get(REPLAY_NONCE_ATTRIBUTE))
    if nonce is None:
        nonce = packed.get(REPLAY_NONCE_ATTRIBUTE)
    return nonce if isinstance(nonce, str) and _NONCE.fullmatch(nonce) else None


def _with_overflow(
    own: dict[str, dict[str, Any]], packed: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """`own` plus the packed originals, so the consumer (and a key in an attribute) sees every
    original after a replay.

    A message dead-lettered with more attributes than fit next to ours keeps nine and carries
    the rest inside `eo-failure`; after a replay they are only there. What is malformed is left
    out, and a restored attribute never replaces one the message carries itself.
    """
    attributes: dict[str, dict[str, Any]] = dict(own)
    overflow = packed.get(OVERFLOW_KEY)
    if isinstance(overflow, dict):
        for name, value in overflow.items():
            restored = _restorable(name, value)
            if restored is not None and name not in attributes:
                attributes[name] = restored
    return attributes


def _string_value(attribute: Any) -> str | None:
    value = attribute.get("stringValue") if isinstance(attribute, dict) else None
    return value if isinstance(value, str) else None


def _packed(attributes: dict[Any, Any]) -> dict[str, Any]:
    return packed_json(_string_value(attributes.get(PACKED_ATTRIBUTE)))


def packed_json(text: Any) -> dict[str, Any]:
    """The JSON object in an `eo-failure` value, or {} when absent or malformed."""
    if not isinstance(text, str):
        return {}
    try:
        packed = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    return packed if isinstance(packed, dict) else {}


def _restorable(name: Any, value: Any) -> dict[str, str] | None:
    """A packed original in event form, if SQS could have accepted it; else None."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or not isinstance(value, dict):
        return None
    data_type = value.get("dataType")
    if (
        not isinstance(data_type, str)
        or len(data_type) > 256
        or not _DATA_TYPE.fullmatch(data_type)
    ):
        return None
    base = data_type.split(".", 1)[0]
    if base == "Binary":
        binary = value.get("binaryValue")
        if not isinstance(binary, str) or not binary or not is_base64(binary):
            return None
        return {"dataType": data_type, "binaryValue": binary}
    text = value.get("stringValue")
    if not isinstance(text, str) or not text or INVALID_CHARS.search(text):
        return None
    if base == "Number" and not _NUMBER.fullmatch(text):
        return None
    return {"dataType": data_type, "stringValue": text}


def is_attribute_name(name: str) -> bool:
    """A name SQS accepts for a message attribute (what a DLQ copy can carry)."""
    return _NAME.fullmatch(name) is not None


def is_base64(text: str) -> bool:
    """Strict base64, as SQS needs a binary attribute value to be."""
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True
