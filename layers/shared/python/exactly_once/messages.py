"""Reading the fields of a Lambda SQS event record."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from exactly_once.errors import PermanentError

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
_INVALID_CHARS = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class NonJsonBody(PermanentError):
    """The body is not JSON and the consumer did not opt into raw bodies."""


def message_id(record: Any) -> str:
    if isinstance(record, dict) and isinstance(record.get("messageId"), str):
        return str(record["messageId"])
    return ""


def parse_body(record: dict[str, Any], raw: bool) -> Any:
    body = record.get("body")
    if not isinstance(body, str):
        raise NonJsonBody(f"record has no string body (found {type(body).__name__})")
    if raw:
        return body
    try:
        return json.loads(body)
    except ValueError as exc:
        raise NonJsonBody(f"body is not JSON: {exc}") from exc
    except RecursionError as exc:  # "[[[[…" from a producer: poison, not a crash
        raise NonJsonBody("body is JSON nested too deeply to parse") from exc


def replay_nonce(record: Any) -> str | None:
    """The replay nonce the message carries (plain or packed), or None. Never raises.

    The store compares it with the FAILED record's own nonce; a match is what makes a delivery
    a replay that may run a permanent failure again. Anything but a short printable-ASCII token
    is malformed (and would only be a guess): None, so it never reaches a store condition.
    """
    attributes = _attributes(record)
    nonce = _string_value(attributes.get(REPLAY_NONCE_ATTRIBUTE))
    if nonce is None:
        nonce = _packed(attributes).get(REPLAY_NONCE_ATTRIBUTE)
    return nonce if isinstance(nonce, str) and _NONCE.fullmatch(nonce) else None


def message_attributes(record: Any) -> dict[str, dict[str, Any]]:
    """The record's message attributes (Lambda event form), with packed originals restored.

    A message dead-lettered with more attributes than fit next to ours keeps nine and carries
    the rest inside `eo-failure`; after a replay they are only there. Restoring them lets the
    consumer (and a key in an attribute) see every original. Never raises: what is malformed
    is left out, and a restored attribute never replaces one the message carries itself.
    """
    attributes = {
        name: value
        for name, value in _attributes(record).items()
        if isinstance(name, str) and isinstance(value, dict)
    }
    overflow = _packed(attributes).get(OVERFLOW_KEY)
    if isinstance(overflow, dict):
        for name, value in overflow.items():
            restored = _restorable(name, value)
            if restored is not None and name not in attributes:
                attributes[name] = restored
    return attributes


def group_id(record: Any) -> str | None:
    if not isinstance(record, dict):
        return None
    attributes = record.get("attributes")
    if not isinstance(attributes, dict):
        return None
    value = attributes.get("MessageGroupId")
    return str(value) if value is not None else None


def is_fifo_event(records: list[Any]) -> bool:
    return any(
        isinstance(r, dict) and str(r.get("eventSourceARN", "")).endswith(".fifo") for r in records
    )


def queue_url_from_arn(arn: str, endpoint_url: str) -> str:
    """arn:aws:sqs:REGION:ACCOUNT:NAME -> ENDPOINT/ACCOUNT/NAME (works for AWS and local)."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"not an SQS queue ARN: {arn!r}")
    return f"{endpoint_url.rstrip('/')}/{parts[4]}/{parts[5]}"


def sanitise(text: str) -> str:
    """`text` with every character SQS rejects replaced by U+FFFD; valid text is unchanged.

    SQS accepts #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF. Python strings can also
    hold lone surrogates, which cannot even be encoded as UTF-8.
    """
    return _INVALID_CHARS.sub("\ufffd", text)


def _attributes(record: Any) -> dict[Any, Any]:
    attributes = record.get("messageAttributes") if isinstance(record, dict) else None
    return attributes if isinstance(attributes, dict) else {}


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
    if not isinstance(text, str) or not text or _INVALID_CHARS.search(text):
        return None
    if base == "Number" and not _NUMBER.fullmatch(text):
        return None
    return {"dataType": data_type, "stringValue": text}


def is_base64(text: str) -> bool:
    """Strict base64, as SQS needs a binary attribute value to be."""
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True
