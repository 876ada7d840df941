"""How a key is stored: as it is, or hashed when it cannot be (every entry point applies it)."""

from __future__ import annotations

from exactly_once.stores.codec import sha256_hex

# DynamoDB partition keys are at most 2048 bytes and the scope shares them.
MAX_KEY_BYTES = 1024


HASHED_PREFIX = "sha256:"


def storable_key(key: str) -> str:
    """`key`, or `sha256:` + its SHA-256 when it cannot be stored as it is: too long for a
    partition key, not valid UTF-8, or starting with `sha256:` itself.

    The last rule keeps the two kinds of key apart: were a plain `sha256:<digest of K>` kept as
    it is, it would name K's record and be answered with K's result. Hashed, it can never equal
    another key's stored form (short of a SHA-256 collision). Apply it once, where a key enters
    (it is not idempotent: a stored `sha256:` key given again is hashed again). PostgreSQL
    hashes a key with a NUL the same way (stores/postgres/ids.py `db_key`)."""
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
