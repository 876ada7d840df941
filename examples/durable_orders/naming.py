"""The durable execution's name and payload for an order: the same for every delivery of it.

Lambda treats `DurableExecutionName` as the start's idempotency key (Invoke's
X-Amz-Durable-Execution-Name header): a second Invoke with a name that exists and the same payload
returns the existing execution, with another payload it is refused with
DurableExecutionAlreadyStartedException. So both must be deterministic: the name from the
business key alone (never the message id, which a DLQ redrive changes), and the payload from the
order alone (never the receive count or the message's attributes), byte for byte.

The name's rules come from the Lambda service model (botocore's lambda/2015-03-31): 1 to 64
characters of `[a-zA-Z0-9-_]`. An order id can hold anything, so the name is a readable prefix
of the id (other characters made `-`) and a digest of the scope and the whole id: two ids that
look alike after the substitution ("a b", "a-b") still get different names.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

MAX_NAME = 64  # the service model's max for DurableExecutionName
DIGEST_CHARS = 32  # 128 bits of sha256: no two keys share a name in practice
READABLE_CHARS = MAX_NAME - DIGEST_CHARS - 1
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")


def execution_name(scope: str, key: str) -> str:
    """The durable execution name of `key` in `scope`: deterministic, unique per (scope, key),
    and within the name's allowed characters and length."""
    if not scope or not key:
        raise ValueError("scope and key must be non-empty")
    joined = f"{scope}\x00{key}".encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(joined).hexdigest()[:DIGEST_CHARS]
    readable = _NOT_ALLOWED.sub("-", key)[:READABLE_CHARS]
    return f"{readable}-{digest}"


def payload(order: dict[str, Any]) -> bytes:
    """The Invoke payload of `order`: canonical JSON (sorted keys, no spaces), so that every
    delivery of the same order sends the same bytes and Lambda sees the same payload. ASCII
    JSON: a lone surrogate (which a message's JSON may escape, and UTF-8 cannot encode) is
    escaped again instead of failing the batch."""
    return json.dumps({"order": order}, sort_keys=True, separators=(",", ":")).encode("ascii")
