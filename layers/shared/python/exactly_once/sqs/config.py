"""The queue consumer's settings (and the SNS subscriber's, which shares them): environment
variables, overridden by decorator keyword arguments."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from exactly_once.config import checked_choice, env_choice, env_int, store_settings
from exactly_once.errors import ConfigurationError
from exactly_once.lease import LeasePolicy
from exactly_once.sqs.envelopes import ENVELOPE_MODES


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
    # See envelopes.ENVELOPE_MODES. Off unless asked: switching it on changes the key of a
    # queue that already receives envelopes (key=None becomes the SNS MessageId), so a message
    # in flight across the upgrade could run again. IdempotentTopic.subscribe_queue sets auto.
    sns_envelope: str = "off"
    dsn: str | None = None  # PostgreSQL (see stores/protocol.py `open_store`)
    # A stream record failing retryably this many times is given up (dead-lettered with its
    # reason) so its shard moves on; None leaves it to the mapping's retry limit and record age.
    max_attempts: int | None = None

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
        cls,
        overrides: dict[str, Any],
        scope_variable: str = "CONSUMER_SCOPE",
        max_attempts_variable: str | None = None,
    ) -> ConsumerConfig:
        """Read the environment now (not at import), so tests and local tools can set it.
        The SNS subscriber shares these settings, with its scope in SUBSCRIBER_SCOPE; only the
        stream consumer reads a give-up limit (`max_attempts_variable`): a queue's is SQS's
        maxReceiveCount."""
        given = {k: v for k, v in overrides.items() if v is not None}
        defaults: dict[str, Any] = {
            **store_settings(given, scope_variable),
            "dead_letter_queue_url": os.environ.get("DEAD_LETTER_QUEUE_URL") or None,
            "concurrency": env_int("BATCH_CONCURRENCY", 10),
            "deadline_margin_ms": env_int("DEADLINE_MARGIN_MS", 0) or None,
            "sns_envelope": env_choice("SNS_ENVELOPE", ENVELOPE_MODES, "off"),
        }
        if max_attempts_variable is not None:
            defaults["max_attempts"] = env_int(max_attempts_variable, 0) or None
        if "fingerprint_fields" in given:
            given["fingerprint_fields"] = tuple(given["fingerprint_fields"])
        merged = {**defaults, **given}
        merged["sns_envelope"] = checked_choice(
            "SNS_ENVELOPE", str(merged["sns_envelope"]), ENVELOPE_MODES
        )
        config = cls(**merged)
        if config.concurrency < 1:
            raise ConfigurationError("concurrency must be at least 1")
        if config.max_attempts is not None and config.max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        return config
