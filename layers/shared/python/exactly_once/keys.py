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
    """The key as a string. Long keys, and keys that are not valid UTF-8, are hashed so they
    always fit a partition key."""
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


def storable_key(key: str) -> str:
    """`key`, or its SHA-256 when it is too long for a partition key or not valid UTF-8."""
    try:
        fits = len(key.encode("utf-8")) <= MAX_KEY_BYTES
    except UnicodeEncodeError:  # a lone surrogate (valid JSON) cannot be stored as a string
        fits = False
    return key if fits else "sha256:" + sha256_hex(key)
