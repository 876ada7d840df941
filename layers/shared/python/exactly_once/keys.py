"""Finding a record's idempotency key: body path, message attribute, callable or messageId."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exactly_once.codec import lookup, sha256_hex
from exactly_once.errors import PermanentError
from exactly_once.messages import SqsMessage

KeySpec = str | Callable[[dict[str, Any]], Any] | None

# DynamoDB partition keys are at most 2048 bytes and the scope shares them.
MAX_KEY_BYTES = 1024


class MissingKey(PermanentError):
    """The record carries no usable idempotency key; retrying cannot add one."""


def resolve_key(spec: KeySpec, message: SqsMessage, body: Any) -> str:
    """The key as a string, as the store keeps it (`storable_key`): long keys, keys that are
    not valid UTF-8 and keys that start with `sha256:` are hashed."""
    if spec is None:
        value: Any = message.message_id
        where = "messageId"
    elif callable(spec):
        where = getattr(spec, "__name__", "key function")
        try:
            value = spec(message.record)
        except BaseException as exc:  # it raises again on the same record: permanent
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise MissingKey(f"key function {where} raised {type(exc).__name__}: {exc}") from exc
    elif spec.startswith("attribute:"):
        name = spec.removeprefix("attribute:")
        attribute = message.message_attributes.get(name) or {}  # incl. ones a DLQ trip packed
        value = attribute.get("stringValue")
        where = f"message attribute {name!r}"
    else:
        value = lookup(body, spec) if isinstance(body, dict | list) else None
        where = f"body field {spec!r}"

    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise MissingKey(f"no idempotency key at {where} (found {type(value).__name__})")
    return storable_key(str(value))


HASHED_PREFIX = "sha256:"


def storable_key(key: str) -> str:
    """`key`, or `sha256:` + its SHA-256 when it cannot be stored as it is: too long for a
    partition key, not valid UTF-8, or starting with `sha256:` itself.

    The last rule keeps the two kinds of key apart: were a plain `sha256:<digest of K>` kept as
    it is, it would name K's record and be answered with K's result. Hashed, it can never equal
    another key's stored form (short of a SHA-256 collision). Apply it once, where a key enters
    (it is not idempotent: a stored `sha256:` key given again is hashed again). PostgreSQL
    hashes a key with a NUL the same way (postgres/store.py `db_key`)."""
    try:
        fits = len(key.encode("utf-8")) <= MAX_KEY_BYTES
    except UnicodeEncodeError:  # a lone surrogate (valid JSON) cannot be stored as a string
        fits = False
    if fits and not key.startswith(HASHED_PREFIX):
        return key
    return hashed_key(key)


def hashed_key(key: str) -> str:
    """The stored form of a key that cannot be kept as it is."""
    return HASHED_PREFIX + sha256_hex(key)
