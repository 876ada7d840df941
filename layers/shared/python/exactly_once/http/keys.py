"""The Idempotency-Key header: read it, check it, and scope it to its caller.

The IETF httpapi draft makes the field a Structured Field String (`"8e03978e-..."`, quoted);
Stripe and most clients send the bare token. Both are accepted and mean the same key.
"""

from __future__ import annotations

import re

from exactly_once.keys import storable_key

MAX_KEY_LENGTH = 255
_PRINTABLE = re.compile(r"[\x20-\x7e]+")
_SF_STRING = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')


class InvalidKey(ValueError):
    """The header is there but is not a usable key; the message says why, for the 400."""


def parse_key(value: str) -> str:
    """The key a header value carries: unquoted if it is a Structured Field String."""
    value = value.strip(" \t")
    quoted = _SF_STRING.fullmatch(value)
    if quoted:
        value = re.sub(r"\\(.)", r"\1", quoted.group(1))
    elif "," in value:  # API Gateway joins a repeated header with commas: a list, not a key
        raise InvalidKey(
            "one key per request: a repeated header (or a key with a comma, which must then "
            "be sent as a quoted string) is refused"
        )
    if not value:
        raise InvalidKey("the key is empty")
    if len(value) > MAX_KEY_LENGTH:
        raise InvalidKey(f"the key is {len(value)} characters long; at most {MAX_KEY_LENGTH}")
    if not _PRINTABLE.fullmatch(value):
        raise InvalidKey("the key must be printable ASCII")
    return value


def scoped_key(caller: str, key: str) -> str:
    """One record per (caller, key): `caller|key`, with `|` and `%` escaped in the caller so
    no two pairs meet. Too long for a partition key: hashed whole, which is still per pair."""
    escaped = caller.replace("%", "%25").replace("|", "%7C")
    return storable_key(f"{escaped}|{key}")
