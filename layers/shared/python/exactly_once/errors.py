"""Exceptions users raise or catch."""

from __future__ import annotations


class LeaseLost(Exception):
    """Another holder owns the record now: this execution must not apply its effect, record its
    step or write its outcome. Importable from `exactly_once.effects`, where it was first."""


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


class LockInherited(RuntimeError):
    """A lock taken by the process this one was cloned from (a fork, a SnapStart restore).

    The copy holds the parent's token, and every write made with it would pass the store's
    fence as the parent's own: a child could complete the parent's key with its result, and the
    parent would then read that COMPLETED as its own lost reply. So a clone never acts as the
    holder: every write and effect made with an inherited lock is refused with this error, and
    the parent's lock is left as it is. Take a lock of the clone's own instead.
    """


class StepOrderError(PermanentError):
    """A step was called where the key's recovery points say another step finished: the code
    changed its steps while the key was in flight, or a step name is used twice. Resuming it
    could skip or repeat work, so the key fails permanently for a person to look at."""


class StepResultUnstorable(PermanentError):
    """A step's result cannot be kept as its recovery point (over the result cap, or a type the
    codec cannot round-trip): a retry would run the step again, so the key fails permanently
    instead. The step's own effect has happened; its recovery point has not been written."""


class StepWriteRefused(PermanentError):
    """A step's fenced write (DynamoDB) was refused by its own condition: nothing of the step
    was written, and its recovery point neither. Raised with the index of the refused write."""

    def __init__(self, message: str, index: int) -> None:
        super().__init__(message)
        self.index = index
