"""JSON encoding that keeps Python types across the DynamoDB round trip, and payload fingerprints.

Results are stored as JSON text rather than DynamoDB maps so that their types survive exactly:
DynamoDB maps turn every number into Decimal, which is the bug users hit with Powertools.

What round-trips: JSON's own types, Decimal, bytes, set, frozenset, tuple, ints of any size and
dicts with hashable non-string keys. Those are written as one-key dicts whose key starts with
`__eo_`; a user dict that could be mistaken for one is wrapped, so user data never collides with
a tag. Anything else raises `Unstorable`, and the store keeps a digest or a reason instead.
Encoding walks the value itself (not `json.dumps(default=...)`) because `json` turns tuples into
lists and int keys into strings before a hook could see them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from decimal import Decimal
from typing import Any

_PREFIX = "__eo_"
_DECIMAL = "__eo_decimal__"
_BYTES = "__eo_bytes__"
_SET = "__eo_set__"
_FROZENSET = "__eo_frozenset__"
_TUPLE = "__eo_tuple__"
_INT = "__eo_int__"  # hex: str(int) is capped at 4300 digits, hex is not
_MAP = "__eo_map__"  # [[key, value], ...] for dicts with non-string keys
_DICT = "__eo_dict__"  # a user dict that looks like a tag, wrapped

MAX_DEPTH = 100  # deeper results are not stored (and a cycle ends here too)
_BIG_INT_BITS = 10_000  # ~3000 digits: well inside json's 4300-digit parsing limit


class Unstorable(ValueError):
    """The value cannot be encoded so that it comes back equal."""


def _sort_key(encoded: Any) -> str:
    return json.dumps(encoded, sort_keys=True, ensure_ascii=True)


def _encode(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise Unstorable(f"nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | str | float):
        return value
    if isinstance(value, int):
        if value.bit_length() > _BIG_INT_BITS:
            return {_INT: hex(value)}
        return int(value)  # an IntEnum becomes its value
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            inner = {k: _encode(v, depth + 1) for k, v in value.items()}
            looks_like_tag = len(value) == 1 and next(iter(value)).startswith(_PREFIX)
            return {_DICT: inner} if looks_like_tag else inner
        return {_MAP: [[_encode(k, depth + 1), _encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v, depth + 1) for v in value]}
    if isinstance(value, Decimal):
        return {_DECIMAL: str(value)}
    if isinstance(value, bytes | bytearray):
        return {_BYTES: base64.b64encode(value).decode("ascii")}
    if isinstance(value, set | frozenset):
        tag = _FROZENSET if isinstance(value, frozenset) else _SET
        return {tag: sorted((_encode(v, depth + 1) for v in value), key=_sort_key)}
    raise Unstorable(f"{type(value).__name__} is not storable")


def _decode(node: Any) -> Any:
    if isinstance(node, list):
        return [_decode(v) for v in node]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        ((tag, inner),) = node.items()
        if tag == _DICT:
            return {k: _decode(v) for k, v in inner.items()}
        if tag == _DECIMAL:
            return Decimal(inner)
        if tag == _BYTES:
            return base64.b64decode(inner)
        if tag == _INT:
            return int(inner, 16)
        if tag == _TUPLE:
            return tuple(_decode(v) for v in inner)
        if tag == _SET:
            return {_decode(v) for v in inner}
        if tag == _FROZENSET:
            return frozenset(_decode(v) for v in inner)
        if tag == _MAP:
            return {_decode(k): _decode(v) for k, v in inner}
    return {k: _decode(v) for k, v in node.items()}


def dumps(value: Any) -> str:
    """Encode a result as valid UTF-8 JSON text; raises `Unstorable` when it can't round-trip."""
    text = json.dumps(_encode(value, 0), separators=(",", ":"), ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped as \\udXXX, which loads restores
        text = json.dumps(_encode(value, 0), separators=(",", ":"), ensure_ascii=True)
    return text


def loads(text: str) -> Any:
    return _decode(json.loads(text))


def canonical_json(value: Any) -> str:
    """Key-sorted, whitespace-free JSON of a parsed payload: equal payloads give equal text.

    Payloads come from `json.loads`, so plain `json` suffices; unlike results they are not
    depth-limited, because a fingerprint must not reject a body the consumer can handle.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def utf8(text: str) -> bytes:
    """UTF-8 bytes of any str; a lone surrogate (valid in JSON) is kept rather than refused."""
    return text.encode("utf-8", "surrogatepass")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(utf8(text)).hexdigest()


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


# The characters SQS rejects, listed: the complement of what it accepts (see `sanitise`). The
# same set as the negated class "[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]",
# which `re` takes ~4 ms to compile (it builds a table over the whole code space) against ~0.3 ms
# for this one; the layer compiles it at every cold start.
INVALID_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def sanitise(text: str) -> str:
    """`text` with every character SQS rejects replaced by U+FFFD; valid text is unchanged.

    SQS accepts #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF. Python strings can also
    hold lone surrogates, which cannot even be encoded as UTF-8.
    """
    return INVALID_CHARS.sub("\ufffd", text)
