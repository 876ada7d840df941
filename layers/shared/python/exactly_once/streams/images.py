"""A DynamoDB Streams image (DynamoDB's typed JSON) as the plain JSON a handler reads.

Written here rather than with boto3's TypeDeserializer: that one gives Decimal and Binary
objects, which are not JSON, and loading boto3.dynamodb for it would cost every cold start.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

MAX_DEPTH = 64  # DynamoDB nests documents 32 levels at most; anything deeper is not an image
_INTEGER = re.compile(r"-?[0-9]{1,40}")  # DynamoDB keeps 38 significant digits


class UnreadableImage(ValueError):
    """Not DynamoDB's typed JSON: a forged or damaged record, reported as poison."""


def image_json(image: Any) -> str:
    """The image as JSON text: S as text, N as a number (an integer when it is one), B as its
    base64 text, BOOL, NULL, L and M as themselves, sets as lists."""
    if not isinstance(image, dict):
        raise UnreadableImage(f"an image must be a map, not {type(image).__name__}")
    return json.dumps({name: _plain(value, 1) for name, value in _fields(image)})


def _fields(image: dict[Any, Any]) -> list[tuple[str, Any]]:
    if not all(isinstance(name, str) for name in image):
        raise UnreadableImage("an attribute name is not text")
    return list(image.items())


def _plain(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise UnreadableImage(f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(value, dict) or len(value) != 1:
        raise UnreadableImage("an attribute value must be one {type: value}")
    ((tag, inner),) = value.items()
    if tag in ("S", "B") and isinstance(inner, str):
        return inner
    if tag == "N" and isinstance(inner, str):
        return _number(inner)
    if tag == "BOOL" and isinstance(inner, bool):
        return inner
    if tag == "NULL" and inner is True:
        return None
    if tag in ("SS", "BS") and isinstance(inner, list) and all(isinstance(i, str) for i in inner):
        return list(inner)
    if tag == "NS" and isinstance(inner, list) and all(isinstance(i, str) for i in inner):
        return [_number(i) for i in inner]
    if tag == "L" and isinstance(inner, list):
        return [_plain(item, depth + 1) for item in inner]
    if tag == "M" and isinstance(inner, dict):
        return {name: _plain(item, depth + 1) for name, item in _fields(inner)}
    raise UnreadableImage(f"unknown or malformed type {str(tag)[:16]!r}")


def _number(text: str) -> int | float:
    """An integer stays exact; a fraction becomes a float (read `ctx.record` for the exact
    text). DynamoDB's own range is 1E-130 to 1E+126, so anything past it is forged."""
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise UnreadableImage(f"not a number: {text[:40]!r}") from None
    if not number.is_finite() or abs(number.adjusted()) > 130:
        raise UnreadableImage(f"number out of DynamoDB's range: {text[:40]!r}")
    return float(number)
