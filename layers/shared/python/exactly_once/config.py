"""Entry-point configuration: environment variables, overridden by decorator keyword arguments.

The queue consumer and the HTTP API read the same store settings (table, TTLs, lease, result
cap) from the same variables; each adds its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from exactly_once.errors import ConfigurationError
from exactly_once.lease import LeasePolicy, heartbeat_ms_from_env
from exactly_once.sns_messages import ENVELOPE_MODES


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


@dataclass(frozen=True)
class ConsumerConfig:
    table_name: str | None  # DynamoDB, or
    scope: str
    dead_letter_queue_url: str | None = None
    concurrency: int = 10  # I/O-bound records overlap their waits; SQS batches of 10 fit exactly
    raw_body: bool = False
    fingerprint: bool = True
    fingerprint_fields: tuple[str, ...] | None = None
    block_takeover: bool = False
    lease: LeasePolicy = field(default_factory=LeasePolicy)
    deadline_margin_ms: int | None = None  # None: a fifth of the invocation's budget, 0.5-5 s
    record_ttl_s: int = 15 * 86_400
    failed_ttl_s: int = 30 * 86_400
    result_cap_bytes: int = 64 * 1024
    # See sns_messages.ENVELOPE_MODES. Off unless asked: switching it on changes the key of a
    # queue that already receives envelopes (key=None becomes the SNS MessageId), so a message
    # in flight across the upgrade could run again. IdempotentTopic.subscribe_queue sets auto.
    sns_envelope: str = "off"
    dsn: str | None = None  # PostgreSQL (see stores.open_store)

    def margin_for(self, budget_ms: float) -> float:
        """How close to the deadline a record may still start.

        A fixed margin would defer everything on short timeouts (Lambda's default is 3 s), so
        by default it scales with the budget the invocation started with.
        """
        if self.deadline_margin_ms is not None:
            return float(self.deadline_margin_ms)
        if budget_ms == float("inf"):
            return 0.0
        return min(5_000.0, max(500.0, budget_ms / 5))

    @classmethod
    def resolve(
        cls, overrides: dict[str, Any], scope_variable: str = "CONSUMER_SCOPE"
    ) -> ConsumerConfig:
        """Read the environment now (not at import), so tests and local tools can set it.
        The SNS subscriber shares these settings, with its scope in SUBSCRIBER_SCOPE."""
        given = {k: v for k, v in overrides.items() if v is not None}
        defaults: dict[str, Any] = {
            **store_settings(given, scope_variable),
            "dead_letter_queue_url": os.environ.get("DEAD_LETTER_QUEUE_URL") or None,
            "concurrency": env_int("BATCH_CONCURRENCY", 10),
            "deadline_margin_ms": env_int("DEADLINE_MARGIN_MS", 0) or None,
            "sns_envelope": env_choice("SNS_ENVELOPE", ENVELOPE_MODES, "off"),
        }
        if "fingerprint_fields" in given:
            given["fingerprint_fields"] = tuple(given["fingerprint_fields"])
        merged = {**defaults, **given}
        merged["sns_envelope"] = checked_choice(
            "SNS_ENVELOPE", str(merged["sns_envelope"]), ENVELOPE_MODES
        )
        config = cls(**merged)
        if config.concurrency < 1:
            raise ConfigurationError("concurrency must be at least 1")
        return config


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
    when the store is opened (stores.open_store). `store_given`: the caller has its store
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
