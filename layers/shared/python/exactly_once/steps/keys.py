"""The idempotency key a step hands to the outside world (a payment API, an email service).

It is derived from the key's scope and key, the record's generation (when the record was
created) and the step's position and name, and is the same for every holder of that
generation. That is the point: a holder that died after the provider accepted its call and
before its recovery point was written is followed by one that calls again with the same key,
and the provider answers the first call's result instead of acting twice. The holder's own
fence is deliberately not in it, for the same reason (a takeover has a new fence). A new
generation (the record expired after its TTL and the work was asked for again) gets new keys.
"""

from __future__ import annotations

from exactly_once.stores.codec import sha256_hex

PREFIX = "eo-step-"
DIGEST_CHARS = 40  # 160 bits: unique enough, and well inside providers' limits (Stripe: 255)


def step_key(scope: str, key: str, generation: int, position: int, name: str) -> str:
    """The step's idempotency key for the outside world (see the module's docstring)."""
    parts = (scope, key, str(generation), str(position), name)
    # Each part escaped of the separator, so ("a\x00", "b") and ("a", "\x00b") never collide;
    # `surrogatepass` is codec.sha256_hex's concern (a key from hostile JSON still hashes).
    joined = "\x00".join(part.replace("\\", "\\\\").replace("\x00", "\\0") for part in parts)
    return PREFIX + sha256_hex(joined)[:DIGEST_CHARS]


def stored_key(record_id: str, scope: str, key: str) -> str:
    """The key as the record's id holds it (`scope#<key>`): the one form every holder of the
    record shares. A holder's own `key` may be another form of it: PostgreSQL keeps a key
    with a NUL as its hash (stores/postgres/ids.py), and the completer, which finds keys by
    their record ids, holds that hash, so a step key from the holder's `key` would differ
    between the first holder and the completer (and the provider would act twice)."""
    prefix = scope + "#"
    return record_id[len(prefix) :] if record_id.startswith(prefix) else key
