"""Exceptions users raise or catch."""

from __future__ import annotations


class PermanentError(Exception):
    """Raise from a consumer when retrying cannot help: the record is FAILED and sent to the DLQ."""


class ConfigurationError(Exception):
    """The consumer is missing required configuration (for example IDEMPOTENCY_TABLE)."""


class UnusableInput(PermanentError):
    """Valid SQS input that breaks the code reading it (deep nesting, a raising key function)."""


class CommitFailed(Exception):
    """The transaction holding the business writes and the completion did not commit: none of
    its writes happened, and the holder still holds the key (fail it, or let its lease end).

    Never retried as a plain completion: that would mark the key done without its writes.
    """


class CommitUnknown(Exception):
    """The completion's transaction was sent, and neither its reply nor the record could be read
    afterwards: it committed or not, and the record says which (COMPLETED, or IN_PROGRESS until
    its lease ends and the key is taken over). Neither retried nor failed, for that reason.
    """
