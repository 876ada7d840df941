"""The service rules an SQS consumer's settings must keep (plain Python, no CDK import).

The construct checks them at synth time and the repo's context settings check them too, so a
bad `-c` value fails with the rule's words instead of a CloudFormation rollback.
"""

from __future__ import annotations

SQS_NAME_LIMIT = 80
# The mapping's scaling without provisioned pollers: at most this many concurrent invocations.
MAX_CONCURRENCY = 5
MAX_CONCURRENCY_RANGE = (2, 1000)
# Provisioned mode on an SQS source (CloudFormation's ProvisionedPollerConfig; AWS's defaults
# when one is left out: 2 minimum, 200 maximum).
MIN_POLLERS_RANGE = (2, 200)
MAX_POLLERS_RANGE = (2, 2000)


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


def check_scaling(
    name: str,
    *,
    max_concurrency: int | None,
    min_pollers: int | None,
    max_pollers: int | None,
) -> None:
    """A consumer scales one way: MaximumConcurrency, or provisioned pollers (either bound).

    Lambda refuses a mapping with both; refusing it here fails the synth with the reason
    instead of the deploy. Provisioned mode's minimum pollers are billed around the clock
    (event poller units per hour) whether or not messages arrive: the price of its faster
    scaling (AWS: about 3 times faster, up to 16 times the concurrency).
    """
    provisioned = min_pollers is not None or max_pollers is not None
    if provisioned and max_concurrency is not None:
        raise ValueError(
            f"{name}: provisioned pollers (minPollers/maxPollers) and MaximumConcurrency "
            "(maxConcurrency) cannot be combined on one event source mapping: keep one. "
            "Provisioned mode bills its minimum pollers around the clock."
        )
    for label, value, (low, high) in (
        ("maxConcurrency", max_concurrency, MAX_CONCURRENCY_RANGE),
        ("minPollers", min_pollers, MIN_POLLERS_RANGE),
        ("maxPollers", max_pollers, MAX_POLLERS_RANGE),
    ):
        if value is not None and not low <= value <= high:
            raise ValueError(f"{name}: {label} {value} is outside {low}..{high}")
    if min_pollers is not None and max_pollers is not None and min_pollers > max_pollers:
        raise ValueError(f"{name}: minPollers {min_pollers} is over maxPollers {max_pollers}")


def queue_name(base: str, *, fifo: bool) -> str:
    name = f"{base}.fifo" if fifo else base
    if len(name) > SQS_NAME_LIMIT:
        raise ValueError(f"queue name {name!r} is over {SQS_NAME_LIMIT} characters")
    return name
