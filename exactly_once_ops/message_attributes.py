"""SQS message attributes as the CLI spells them, as SQS returns them, and as JSON.

`send` parses `Name=Value` / `Name:Type=Value`; `replay` copies received attributes (String,
Number and Binary, including the layer's `eo-*` markers) onto the re-sent message unchanged:
the consumer needs them as they are (the replay nonce, the originals packed in `eo-failure`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from exactly_once.sqs.messages import packed_json

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import (
        MessageAttributeValueOutputTypeDef,
        MessageAttributeValueTypeDef,
    )

ERROR_TYPE_ATTRIBUTE = "eo-error-type"
"""Set by the layer on messages it dead-letters itself (see the replay docs)."""
ERROR_MESSAGE_ATTRIBUTE = "eo-error-message"
PACKED_ATTRIBUTE = "eo-failure"
ORIGINAL_ID_ATTRIBUTE = "eo-original-message-id"
"""The layer's attributes as one JSON object, when the message had too many to add them."""
OVERFLOW_KEY = "eo-overflow-attributes"
"""Inside the packed JSON: original attributes (Lambda event form) that did not fit."""

_BASE_TYPES = ("String", "Number", "Binary")
# SQS's rule for attribute names: up to 256 of these characters, no leading or trailing or
# doubled period, and no "AWS." / "Amazon." prefix (reserved). SQS refuses others, and moto
# stores them anyway and then fails every receive of that message.
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,256}")
_RESERVED_PREFIXES = ("aws.", "amazon.")


def check_name(name: str) -> None:
    """Refuse a name SQS would refuse, before anything is sent."""
    if (
        not _NAME.fullmatch(name)
        or name.startswith(".")
        or name.endswith(".")
        or ".." in name
        or name.lower().startswith(_RESERVED_PREFIXES)
    ):
        raise ValueError(
            f"attribute name {name!r}: SQS allows up to 256 letters, digits, '_', '-' and '.' "
            "(not at either end, not doubled), and no 'AWS.' or 'Amazon.' prefix"
        )


def parse_attribute(spec: str) -> tuple[str, MessageAttributeValueTypeDef]:
    """Parse `Name=Value` (String), `Name:Number=5` or `Name:Binary=<base64>`.

    Custom type suffixes (`Number.int`, `String.json`) are allowed, as SQS allows them.
    """
    head, sep, value = spec.partition("=")
    name, _, data_type = head.partition(":")
    name = name.strip()
    data_type = data_type.strip() or "String"
    if not sep or not name:
        raise ValueError(f"attribute {spec!r}: expected Name=Value or Name:Type=Value")
    check_name(name)
    base = data_type.split(".", 1)[0]
    if base not in _BASE_TYPES:
        raise ValueError(f"attribute {name!r}: type {data_type!r} is not String, Number or Binary")
    if base == "Binary":
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"attribute {name!r}: Binary value must be base64") from exc
        return name, {"DataType": data_type, "BinaryValue": raw}
    if base == "Number":
        try:
            float(value)
        except ValueError as exc:
            raise ValueError(f"attribute {name!r}: {value!r} is not a number") from exc
    return name, {"DataType": data_type, "StringValue": value}


def parse_attributes(specs: Iterable[str]) -> dict[str, MessageAttributeValueTypeDef]:
    """Parse repeated `--attribute` options; a repeated name is a mistake, not an override."""
    parsed: dict[str, MessageAttributeValueTypeDef] = {}
    for spec in specs:
        name, value = parse_attribute(spec)
        if name in parsed:
            raise ValueError(f"attribute {name!r} given twice")
        parsed[name] = value
    return parsed


def for_send(
    received: Mapping[str, MessageAttributeValueOutputTypeDef],
) -> dict[str, MessageAttributeValueTypeDef]:
    """Received attributes in the shape SendMessageBatch accepts.

    Receive also returns empty list fields that SQS rejects on send, so only the scalar value
    and the data type are carried over.
    """
    out: dict[str, MessageAttributeValueTypeDef] = {}
    for name, attr in received.items():
        value: MessageAttributeValueTypeDef = {"DataType": attr["DataType"]}
        if "BinaryValue" in attr:
            value["BinaryValue"] = attr["BinaryValue"]
        if "StringValue" in attr:
            value["StringValue"] = attr["StringValue"]
        out[name] = value
    return out


def to_json(
    attributes: Mapping[str, MessageAttributeValueOutputTypeDef],
) -> dict[str, dict[str, str]]:
    """JSON-safe attributes (binary as base64) for backups and previews."""
    out: dict[str, dict[str, str]] = {}
    for name, attr in attributes.items():
        value = {"DataType": attr["DataType"]}
        if "BinaryValue" in attr:
            value["BinaryValue"] = base64.b64encode(attr["BinaryValue"]).decode("ascii")
        if "StringValue" in attr:
            value["StringValue"] = attr["StringValue"]
        out[name] = value
    return out


def scalar(attr: MessageAttributeValueOutputTypeDef) -> str | None:
    """The attribute's value as text (binary as base64), for filters and previews."""
    if "StringValue" in attr:
        return attr["StringValue"]
    if "BinaryValue" in attr:
        return base64.b64encode(attr["BinaryValue"]).decode("ascii")
    return None


def error_type(received: Mapping[str, MessageAttributeValueOutputTypeDef]) -> str | None:
    """The layer's `eo-error-type`, plain or packed in `eo-failure`; None if neither."""
    return layer_attribute(received, ERROR_TYPE_ATTRIBUTE)


def error_message(received: Mapping[str, MessageAttributeValueOutputTypeDef]) -> str | None:
    """The layer's `eo-error-message` (why it dead-lettered the message), plain or packed."""
    return layer_attribute(received, ERROR_MESSAGE_ATTRIBUTE)


def layer_attribute(
    received: Mapping[str, MessageAttributeValueOutputTypeDef], name: str
) -> str | None:
    """One of the layer's `eo-*` attributes, plain or packed in `eo-failure`; None if neither."""
    if name in received:
        return scalar(received[name])
    value = _packed(received).get(name)
    return value if isinstance(value, str) else None


def unpacked(
    received: Mapping[str, MessageAttributeValueOutputTypeDef],
) -> dict[str, MessageAttributeValueOutputTypeDef]:
    """The received attributes plus the originals the layer packed into `eo-failure`.

    What filters should look at: a message with many attributes carries some of its own only
    inside the packed JSON. Malformed packed entries are skipped.
    """
    out = dict(received)
    overflow = _packed(received).get(OVERFLOW_KEY)
    for name, value in (overflow if isinstance(overflow, dict) else {}).items():
        if name in out or not isinstance(value, dict) or not isinstance(value.get("dataType"), str):
            continue
        attr: MessageAttributeValueOutputTypeDef = {"DataType": value["dataType"]}
        if isinstance(value.get("binaryValue"), str):
            try:
                attr["BinaryValue"] = base64.b64decode(value["binaryValue"], validate=True)
            except (binascii.Error, ValueError):
                continue
        elif isinstance(value.get("stringValue"), str):
            attr["StringValue"] = value["stringValue"]
        else:
            continue
        out[name] = attr
    return out


def _packed(received: Mapping[str, MessageAttributeValueOutputTypeDef]) -> dict[str, object]:
    packed = received.get(PACKED_ATTRIBUTE)
    return packed_json(packed.get("StringValue") if packed else None)
