"""What makes two requests "the same" for a key: the method, the path, the query (parameters
with different names in any order, a repeated name's values in theirs), the chosen headers and
the body, canonical where it is JSON.

JSON bodies are compared parsed and key-sorted, so a client that re-serialises its payload on a
retry (other key order, other spacing, 1.50 for 1.5) is not refused with 422. Numbers are read
as decimals, never as floats: 0.1 and 0.10000000000000001 are different amounts to a handler
that parses with Decimal, so they are different requests here too. Anything that does not
parse (binary, text, JSON too deep) is compared byte for byte: the fingerprint never fails,
whatever the body holds.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import Any

from exactly_once.http.request import HttpRequest
from exactly_once.stores.codec import sha256_hex


def request_fingerprint(request: HttpRequest, headers: tuple[str, ...] = ()) -> str:
    parts = {
        "method": request.method,
        "path": request.path,
        "query": _query(request.query),
        "headers": {name: request.header(name) for name in headers},
        "body": _body_digest(request.body),
    }
    return sha256_hex(json.dumps(parts, sort_keys=True, ensure_ascii=True))


def _query(pairs: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """The pairs ordered by name only: a stable sort keeps the order of a repeated name's values.
    `?approver=alice&approver=bob` is a list a handler reads in order, so the reverse order is
    another request (422 with the same key); parameters with different names still commute."""
    return sorted(pairs, key=lambda pair: pair[0])


def _body_digest(body: bytes) -> str:
    try:
        parsed = json.loads(body, parse_float=Decimal, parse_int=Decimal)
        return "json:" + sha256_hex(_canonical(parsed))
    except (ValueError, RecursionError, ArithmeticError):  # not JSON, not UTF-8, too deep
        return "bytes:" + hashlib.sha256(body).hexdigest()


def _canonical(value: Any) -> str:
    """Key-sorted JSON text, numbers as `#` + their normalised decimal (no JSON text starts
    with `#`, so a number never meets a string)."""
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(f"{json.dumps(k)}:{_canonical(v)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_canonical(v) for v in value) + "]"
    if isinstance(value, Decimal):
        return "#" + format(value.normalize(), "f" if abs(value.adjusted()) < 30 else "")
    return json.dumps(value, ensure_ascii=False)  # str, bool, None
