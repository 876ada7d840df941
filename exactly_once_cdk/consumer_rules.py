"""The service rules an SQS consumer's settings must keep (plain Python, no CDK import).

The construct checks them at synth time and the repo's context settings check them too, so a
bad `-c` value fails with the rule's words instead of a CloudFormation rollback.
"""

from __future__ import annotations

SQS_NAME_LIMIT = 80


def visibility_timeout_seconds(timeout_seconds: int, batching_window_seconds: int) -> int:
    """AWS's rule for Lambda on SQS: at least six times the timeout, plus the window.

    A message must stay invisible through the function's retries on throttling, or a second
    poller receives it while the first still runs it.
    """
    return 6 * timeout_seconds + batching_window_seconds


def check_consumer(name: str, *, fifo: bool, batch_size: int, batching_window_seconds: int) -> None:
    if fifo and batching_window_seconds:
        raise ValueError(f"{name}: FIFO queues have no batching window")
    if fifo and batch_size > 10:
        raise ValueError(f"{name}: a FIFO event source takes at most 10 messages a batch")
    if batch_size > 10 and batching_window_seconds < 1:
        raise ValueError(f"{name}: batches over 10 need a batching window of 1 s or more")


def queue_name(base: str, *, fifo: bool) -> str:
    name = f"{base}.fifo" if fifo else base
    if len(name) > SQS_NAME_LIMIT:
        raise ValueError(f"queue name {name!r} is over {SQS_NAME_LIMIT} characters")
    return name
