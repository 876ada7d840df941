"""What makes two requests "the same" for a key: the method, the path, the query, the chosen
headers and the body, canonical where it is JSON.

JSON bodies are compared parsed and key-sorted, so a client that re-serialises its payload on a
retry (other key order, other spacing) is not refused with 422. Anything that does not parse
(binary, text, JSON too deep or with numbers too long for Python) is compared byte for byte:
the fingerprint never fails, whatever the body holds.
"""

from __future__ import annotations

import hashlib
import json

from exactly_once.codec import canonical_json, sha256_hex
from exactly_once.http_request import HttpRequest


def request_fingerprint(request: HttpRequest, headers: tuple[str, ...] = ()) -> str:
    parts = {
        "method": request.method,
        "path": request.path,
        "query": sorted(request.query),
        "headers": {name: request.header(name) for name in headers},
        "body": _body_digest(request.body),
    }
    return sha256_hex(json.dumps(parts, sort_keys=True, ensure_ascii=True))


def _body_digest(body: bytes) -> str:
    try:
        return "json:" + sha256_hex(canonical_json(json.loads(body)))
    except (ValueError, RecursionError):  # not JSON, not UTF-8, too deep, too many digits
        return "bytes:" + hashlib.sha256(body).hexdigest()
