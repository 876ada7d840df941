"""JSON encoding that keeps Python types across the DynamoDB round trip, and payload fingerprints.

Results are stored as JSON text rather than DynamoDB maps so that their types survive exactly:
DynamoDB maps turn every number into Decimal, which is the bug users hit with Powertools.
"""

from __future__ import annotations

import base64
import hashlib
import json
from decimal import Decimal
from typing import Any

_DECIMAL = "__eo_decimal__"
_BYTES = "__eo_bytes__"
_SET = "__eo_set__"
_TAGS = frozenset({_DECIMAL, _BYTES, _SET})


def _tag(value: Any) -> Any:
    if isinstance(value, Decimal):
        return {_DECIMAL: str(value)}
    if isinstance(value, bytes | bytearray):
        return {_BYTES: base64.b64encode(value).decode("ascii")}
    if isinstance(value, set | frozenset):
        return {_SET: sorted(value, key=repr)}
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _untag(obj: dict[str, Any]) -> Any:
    if len(obj) == 1:
        (tag, value), *_ = obj.items()
        if tag == _DECIMAL:
            return Decimal(value)
        if tag == _BYTES:
            return base64.b64decode(value)
        if tag == _SET:
            return set(value)
    return obj


def dumps(value: Any) -> str:
    """Encode a result; Decimal, bytes and sets are tagged so `loads` gives them back."""
    return json.dumps(value, default=_tag, separators=(",", ":"), ensure_ascii=False)


def loads(text: str) -> Any:
    return json.loads(text, object_hook=_untag)


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON: equal payloads give equal text."""
    return json.dumps(
        value, default=_tag, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint(payload: Any, fields: tuple[str, ...] | None = None) -> str:
    """SHA-256 of the canonical payload, or of the chosen dotted-path fields only.

    A raw string payload (a non-JSON body the consumer opted into) is hashed as it is.
    """
    if fields:
        payload = {field: lookup(payload, field) for field in fields}
    if isinstance(payload, str):
        return sha256_hex(payload)
    return sha256_hex(canonical_json(payload))


_MISSING = object()


def lookup(payload: Any, dotted: str, default: Any = None) -> Any:
    """Follow a dotted path ("order.id", "items.0.sku") through dicts and lists."""
    node = payload
    for part in dotted.split("."):
        if isinstance(node, dict):
            node = node.get(part, _MISSING)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return default
        if node is _MISSING:
            return default
    return node
