"""HTTP API configuration: the store settings every entry point shares, plus the header rules."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from exactly_once.config import env_bool, store_settings
from exactly_once.errors import ConfigurationError
from exactly_once.lease import LeasePolicy

DEFAULT_HEADER = "Idempotency-Key"
# A replay must be able to say at least the status and headers of what it cannot replay whole.
MIN_API_RESULT_CAP = 4 * 1024
RECORD_TTL_S = 86_400  # clients retry for minutes or hours; a day is generous


@dataclass(frozen=True)
class ApiConfig:
    table_name: str | None  # DynamoDB, or
    scope: str
    header: str = DEFAULT_HEADER
    key_required: bool = True
    # The draft's non-idempotent methods. GET, PUT and DELETE are idempotent by HTTP's own
    # rules, so a key on them is ignored rather than stored.
    methods: tuple[str, ...] = ("POST", "PATCH")
    fingerprint_headers: tuple[str, ...] = ()
    response_headers: tuple[str, ...] | None = None  # None: replay every header
    block_takeover: bool = False
    lease: LeasePolicy = field(default_factory=LeasePolicy)
    record_ttl_s: int = RECORD_TTL_S
    failed_ttl_s: int = 30 * 86_400
    result_cap_bytes: int = 64 * 1024
    dsn: str | None = None  # PostgreSQL (see stores/protocol.py `open_store`)

    @classmethod
    def resolve(cls, overrides: dict[str, Any]) -> ApiConfig:
        """Read the environment now (not at import), so tests and local tools can set it."""
        given = {k: v for k, v in overrides.items() if v is not None}
        defaults = store_settings(given, "API_SCOPE", record_ttl_s=RECORD_TTL_S)
        defaults["key_required"] = env_bool("IDEMPOTENCY_KEY_REQUIRED", True)
        config = cls(**{**defaults, **given})
        # HTTP compares methods upper case and header names lower case.
        config = replace(
            config,
            methods=tuple(m.upper() for m in config.methods),
            fingerprint_headers=tuple(h.lower() for h in config.fingerprint_headers),
            response_headers=None
            if config.response_headers is None
            else tuple(h.lower() for h in config.response_headers),
        )
        if config.result_cap_bytes < MIN_API_RESULT_CAP:
            raise ConfigurationError(
                f"result_cap_bytes must be at least {MIN_API_RESULT_CAP} for an API: a replay "
                "needs at least the first response's status and headers"
            )
        if not config.header.isascii() or not config.header.replace("-", "").isalnum():
            raise ConfigurationError(f"not a header name: {config.header!r}")
        return config
