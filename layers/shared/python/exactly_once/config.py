"""Settings every entry point shares: strict environment readers and the store settings.

The queue consumer, the SNS subscriber, the HTTP API and `once` read the same store settings
(table or DSN, scope, TTLs, lease) from the same variables; each entry point's room adds its
own (`sqs/config.py`, `http/config.py`).
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from exactly_once.errors import ConfigurationError
from exactly_once.lease import LeasePolicy, heartbeat_ms_from_env


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from exc


TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")


def env_bool(name: str, default: bool) -> bool:
    """A yes/no setting: one of TRUE_WORDS or FALSE_WORDS in any case, or unset (or empty) for
    `default`. Anything else is refused: `IDEMPOTENCY_KEY_REQUIRED=ture` read as false would
    quietly turn a guard off."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ConfigurationError(
        f"{name} must be one of {', '.join(TRUE_WORDS)} (on) or {', '.join(FALSE_WORDS)} (off), "
        f"got {raw!r}"
    )


def env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """One of `choices` (any case), or unset (or empty) for `default`; anything else is
    refused rather than read as the default."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return checked_choice(name, raw, choices)


def checked_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    """`value` as one of `choices` (compared stripped, lower case), else ConfigurationError."""
    word = value.strip().lower()
    if word not in choices:
        raise ConfigurationError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return word


class StoreSettings(Protocol):
    """What an entry point's configuration says about its store."""

    @property
    def table_name(self) -> str | None: ...
    @property
    def dsn(self) -> str | None: ...
    @property
    def record_ttl_s(self) -> int: ...
    @property
    def failed_ttl_s(self) -> int: ...
    @property
    def result_cap_bytes(self) -> int: ...


def store_settings(
    given: dict[str, Any],
    scope_variable: str,
    record_ttl_s: int = 15 * 86_400,
    *,
    store_given: bool = False,
) -> dict[str, Any]:
    """The settings every entry point shares, from the environment; pops the store, scope and
    lease from `given` (the rest of `given` overrides the returned defaults).

    The store is a DynamoDB table (IDEMPOTENCY_TABLE) or a PostgreSQL DSN (IDEMPOTENCY_DSN). One
    given as an argument wins over the environment; both in the environment is an error, raised
    when the store is opened (`open_store`). `store_given`: the caller has its store
    already, so none need be configured.
    """
    table = given.pop("table_name", None)
    dsn = given.pop("dsn", None)
    if not table and not dsn:
        table = os.environ.get("IDEMPOTENCY_TABLE") or None
        dsn = os.environ.get("IDEMPOTENCY_DSN") or None
    if not table and not dsn and not store_given:
        raise ConfigurationError(
            "no store: set IDEMPOTENCY_TABLE (DynamoDB) or IDEMPOTENCY_DSN (PostgreSQL), or "
            "pass table_name= or dsn="
        )
    scope = (
        given.pop("scope", None)
        or os.environ.get(scope_variable)
        or os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
    )
    if not scope:
        raise ConfigurationError(f"set {scope_variable} (or pass scope=) to name the key space")
    lease = given.pop("lease", None) or LeasePolicy(
        margin_ms=env_int("LEASE_MARGIN_MS", 5_000),
        max_ms=env_int("LEASE_MAX_MS", 0) or None,
        heartbeat_ms=heartbeat_ms_from_env(),  # LEASE_HEARTBEAT, LEASE_HEARTBEAT_MS
    )
    return {
        "table_name": table,
        "dsn": dsn,
        "scope": scope,
        "lease": lease,
        "block_takeover": env_bool("BLOCK_EXPIRED_LEASES", False),
        "record_ttl_s": env_int("RECORD_TTL_SECONDS", record_ttl_s),
        "failed_ttl_s": env_int("FAILED_TTL_SECONDS", 30 * 86_400),
    }
