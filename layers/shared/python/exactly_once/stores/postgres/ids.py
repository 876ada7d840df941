"""Record ids as PostgreSQL text holds them.

Text cannot hold NUL (DynamoDB strings can), so a key with one is kept as its SHA-256, as
over-long keys already are (keys.storable_key). A module of its own because the effect ledger
(ledger.py) keys its rows the same way as the store, and needs this rule without the store.
"""

from __future__ import annotations

from exactly_once.keys import hashed_key
from exactly_once.stores import schema


def db_key(key: str) -> str:
    """A key as PostgreSQL text holds it. Text cannot hold NUL (DynamoDB strings can), so a key
    with one is kept as its SHA-256, as over-long keys already are (keys.storable_key). The
    entry points pass keys through storable_key first, so no plain key here starts with
    `sha256:` and none can name a hashed key's row."""
    return key if "\x00" not in key else hashed_key(key)


def db_id(scope: str, key: str) -> str:
    """The record's id (its primary key) for `key` in `scope`."""
    return schema.record_id(scope, db_key(key))
