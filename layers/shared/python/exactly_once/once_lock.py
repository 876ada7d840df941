"""`once`: run any section of code to completion once per key, on the fenced store.

For code outside the queue and HTTP entry points: a script, an ECS task, a Step Functions
task, a handler written by hand. `begin` either takes the key's lock or says what became of
the key: completed (with its stored result), still in progress (until its lease ends), failed
(with its error), or used for other input (a fingerprint mismatch). The lock then ends with
`succeed(result)` or `fail(error)`. Both are fenced: a holder that outlived its lease while
another took the key over (a zombie) cannot overwrite its successor's outcome, and learns it
from `LeaseLost`, as the fenced effects (`effects.put_once`) it may try also tell it.

    with once("reports", "2024-06-01", expected_duration_s=300) as claim:
        if claim.acquired:
            build_the_report()  # a raise records FAILED (retryable unless PermanentError)
        else:
            print(claim.status, claim.result)

This module is the lock's front: `begin` resolves what a caller left out (the store, the
lease from the expected duration and the margin, the owner, a durable execution's resume id)
and `once` wraps it in a block. The lock's parts have one module each, and their names are
importable from here too: `claim` and `Claim` (claims.py), `OnceLock` (held_lock.py), how a
block ends (once_block.py).

The module is not named `once` so that `exactly_once.once` stays the function even after the
module has been imported (a submodule becomes an attribute of its package); for the same
reason no module of the lock is named `begin` or `claim`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from exactly_once import durable, lifecycle
from exactly_once.claims import Claim, ClaimStatus, NotAcquired, claim
from exactly_once.config import store_settings
from exactly_once.errors import ConfigurationError
from exactly_once.held_lock import OnceLock, positive_ms
from exactly_once.keys import storable_key
from exactly_once.lease import LeasePolicy
from exactly_once.lease import owner as lambda_owner
from exactly_once.once_block import OnceBlock
from exactly_once.stores.protocol import Store, open_store

__all__ = [
    "Claim",
    "ClaimStatus",
    "NotAcquired",
    "OnceBlock",
    "OnceLock",
    "begin",
    "claim",
    "once",
]


@dataclass(frozen=True)
class _OnceStore:
    """The store settings `begin` resolved (stores.StoreSettings)."""

    table_name: str | None
    dsn: str | None
    record_ttl_s: int
    failed_ttl_s: int
    result_cap_bytes: int = 64 * 1024
    # Its margin is the clock skew the DynamoDB store tolerates (IdempotencyStore.configured):
    # without it the store judged skew by the default margin, not LEASE_MARGIN_MS.
    lease: LeasePolicy | None = None


def settings_store(settings: dict[str, Any]) -> Store:
    """The store `store_settings(...)` names for `once` (its table or DSN, lifetimes, lease)."""
    return open_store(
        _OnceStore(
            settings["table_name"],
            settings["dsn"],
            settings["record_ttl_s"],
            settings["failed_ttl_s"],
            lease=settings["lease"],
        )
    )


def begin(
    scope: str,
    key: str,
    *,
    expected_duration_s: float | None = None,
    lease_s: float | None = None,
    owner: str | None = None,
    fingerprint: str | None = None,
    block_takeover: bool | None = None,
    table_name: str | None = None,
    dsn: str | None = None,
    store: Store | None = None,
    lambda_context: Any = None,
    resume_id: str | None = None,
) -> Claim:
    """Take the lock on (scope, key), or say what became of the key. One conditional write.

    - `expected_duration_s`: how long the work should take. It is stored (`expected_by`) for
      a monitor of slow work, and the lease is this plus the lease margin (LEASE_MARGIN_MS,
      default 5 s), so a takeover waits until the holder is surely late, not merely slow.
    - `lease_s`: the lease itself, instead of one derived from the expected duration. With
      neither, the lease is the invocation's remaining time plus the margin in Lambda (given
      `lambda_context`), else 60 s plus the margin; the work is expected by the lease's end.
    - `owner`: who holds the key, for people reading the record (default: host and pid, or
      the function and request id in Lambda; then this process's instance id). Fenced
      effects record it as their origin.
    - `fingerprint`: a digest of the input (`codec.fingerprint`); the same key with another
      one is a MISMATCH, never run.
    - `block_takeover`: an expired lease is not taken over but made FAILED for a person (for
      work that must never repeat); default BLOCK_EXPIRED_LEASES.
    - `key`: any text; one too long for a partition key, that is not valid UTF-8, or that
      starts with `sha256:`, is stored as its SHA-256 (`claim.key` says which).
    - `store`, else `table_name` (DynamoDB) or `dsn` (PostgreSQL), else IDEMPOTENCY_TABLE or
      IDEMPOTENCY_DSN (with RECORD_TTL_SECONDS and FAILED_TTL_SECONDS) name the store.
    - `resume_id`: names a holder that outlives one invocation; its next invocation resumes
      the key's IN_PROGRESS lock (new token and fence) instead of finding it in progress. A
      durable function's DurableContext given as `lambda_context` sets it to the execution's
      ARN (see durable.py); such a lock must be given `lease_s` or `expected_duration_s`
      covering the whole execution, waits included, or another execution could take it over
      while this one is suspended.

    Raises what DynamoDB raises when it stays unreachable through botocore's retries.
    """
    if not scope or not key:
        raise ValueError("scope and key must be non-empty")
    # As for queue keys: too long for a partition key, or not UTF-8 (a lone surrogate), the
    # record is keyed by its SHA-256, never refused.
    key = storable_key(key)
    arn = durable.execution_arn(lambda_context)
    if arn is not None:
        if lease_s is None and expected_duration_s is None:
            raise ConfigurationError(
                "a durable execution may suspend inside the block for longer than one "
                "invocation: give once/begin lease_s (or expected_duration_s) covering the "
                "execution, waits included"
            )
        resume_id = resume_id or arn
        lambda_context = durable.lambda_context(lambda_context)
    given: dict[str, Any] = {
        "table_name": table_name,
        "dsn": dsn,
        "scope": scope,
    }
    settings = store_settings(given, "ONCE_SCOPE", store_given=store is not None)
    if store is None:
        store = settings_store(settings)
    policy: LeasePolicy = settings["lease"]
    if lease_s is not None:
        lease_ms = positive_ms(lease_s, "lease_s")
    elif expected_duration_s is not None:
        lease_ms = positive_ms(expected_duration_s, "expected_duration_s") + policy.margin_ms
    else:
        lease_ms = policy.lease_ms(lambda_context)
    # Always written, so an earlier holder's `expected_by` never outlives its attempt.
    expected_ms = (
        lease_ms
        if expected_duration_s is None
        else positive_ms(expected_duration_s, "expected_duration_s")
    )
    holder = owner or (
        lambda_owner(lambda_context)
        if lambda_context is not None
        else f"{socket.gethostname()}:{os.getpid()}:{lifecycle.instance_id()}"
    )
    return claim(
        store,
        scope,
        key,
        lease_ms=lease_ms,
        owner=holder,
        fingerprint=fingerprint,
        block_takeover=settings["block_takeover"] if block_takeover is None else block_takeover,
        expected_duration_ms=expected_ms,
        lambda_context=lambda_context,
        resume_id=resume_id,
        durable_execution=arn,
        heartbeat_ms=policy.heartbeat_ms,
    )


def once(
    scope: str,
    key: str,
    *,
    expected_duration_s: float | None = None,
    lease_s: float | None = None,
    owner: str | None = None,
    fingerprint: str | None = None,
    block_takeover: bool | None = None,
    table_name: str | None = None,
    dsn: str | None = None,
    store: Store | None = None,
    lambda_context: Any = None,
    resume_id: str | None = None,
) -> OnceBlock:
    """`begin` as a context manager (see OnceBlock): `with once(scope, key) as claim:`."""
    return OnceBlock(
        lambda: begin(
            scope,
            key,
            expected_duration_s=expected_duration_s,
            lease_s=lease_s,
            owner=owner,
            fingerprint=fingerprint,
            block_takeover=block_takeover,
            table_name=table_name,
            dsn=dsn,
            store=store,
            lambda_context=lambda_context,
            resume_id=resume_id,
        )
    )
