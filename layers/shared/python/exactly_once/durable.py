"""Lambda durable functions: a replay must resume its own lock, not meet it "in progress".

A durable execution checkpoints its steps and, after a wait or a failure, invokes the handler
again from the start, substituting checkpointed results. A lock taken in the first invocation is
still IN_PROGRESS when the replay reaches the same `once` (the wait suspended the invocation
inside the block), so a plain lock would refuse its own holder forever (Powertools' issue
#7762). Powertools' fix lets any replay through an in-progress record; here the record carries
the execution's ARN (`resume_id`), so only the same execution resumes it, with a new token and
fence, and another execution with the same key still waits or is refused.

Nothing here imports the durable SDK: the context and the suspension are recognised by shape
and class name, so the layer stays lean and works with whichever SDK version the user ships.
"""

from __future__ import annotations

from typing import Any

_SDK = "aws_durable_execution_sdk_python"

TRANSACTION_REFUSED = (
    "a durable execution's lock lends no transaction: a step that wrote in it is checkpointed, "
    "the next suspension (context.wait) rolls the transaction back, and the replay does not run "
    "the step again, so the key would be completed without its writes. Write in a step of the "
    "lock instead (lock.step(name, fn), in step.transaction): its writes commit with the step's "
    "recovery point before the SDK checkpoints anything, and a replay gets the step's result "
    "back without running it again"
)
"""Why no transaction that commits with a durable key's completion can hold a step's writes:
besides the suspension, a crash between the SDK's checkpoint of the step and our COMMIT loses
them too, and committing them at the suspension would make again, at the replay, the writes
made outside steps (a replay runs those again)."""

SUSPENDED_WITH_WRITES = (
    "{key!r} at fence {fence} was suspended with uncommitted writes in its transaction: they "
    "roll back with the invocation, and a replay may not make them again (it skips checkpointed "
    "steps), so the key is made FAILED for a person instead of completing without them. Give a "
    "block that spans a durable wait no transaction; write in a once(...) inside a step"
)


def execution_arn(context: Any) -> str | None:
    """The durable execution's ARN when `context` is a DurableContext; else None."""
    execution = getattr(context, "execution_context", None)
    arn = getattr(execution, "durable_execution_arn", None)
    return arn if isinstance(arn, str) and arn else None


def lambda_context(context: Any) -> Any:
    """The Lambda context inside a DurableContext (its remaining time, request id), else
    `context` itself."""
    if execution_arn(context) is None:
        return context
    return getattr(context, "lambda_context", None)


def is_suspension(error: BaseException | None) -> bool:
    """The SDK's SuspendExecution (a BaseException): the invocation is parked, not failed; the
    lock must stay IN_PROGRESS for the replay to resume."""
    return error is not None and any(
        cls.__name__ == "SuspendExecution" and cls.__module__.startswith(_SDK)
        for cls in type(error).__mro__
    )
