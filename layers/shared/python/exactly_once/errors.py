"""Exceptions users raise or catch."""

from __future__ import annotations


class PermanentError(Exception):
    """Raise from a consumer when retrying cannot help: the record is FAILED and sent to the DLQ."""


class ConfigurationError(Exception):
    """The consumer is missing required configuration (for example IDEMPOTENCY_TABLE)."""


class UnusableInput(PermanentError):
    """Valid SQS input that breaks the code reading it (deep nesting, a raising key function)."""
