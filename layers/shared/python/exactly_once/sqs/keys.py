"""Finding a record's idempotency key: body path, message attribute, callable or messageId."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exactly_once.errors import PermanentError
from exactly_once.keys import storable_key
from exactly_once.sqs.messages import SqsMessage
from exactly_once.stores.codec import lookup

KeySpec = str | Callable[[dict[str, Any]], Any] | None


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
