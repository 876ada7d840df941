"""The service rules a stream consumer's event source mapping must keep (plain Python, no CDK).

Kinesis, DynamoDB Streams and Kafka mappings share their error handling (retries, record age,
bisect, partial batch responses, an on-failure destination); Kinesis and DynamoDB add a
parallelization factor, Kafka needs provisioned pollers for that error handling at all. The
constructs check these at synth time, so a bad value fails with the rule's words instead of a
CloudFormation rollback.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aws_cdk import Duration

BATCH_SIZE_RANGE = (1, 10_000)
BATCHING_WINDOW_RANGE = (0, 300)  # seconds
# CloudFormation's MaximumRetryAttempts is -1 (infinite) or 0..10000; CDK takes None for -1.
RETRY_ATTEMPTS_RANGE = (0, 10_000)
# MaximumRecordAgeInSeconds: -1 (infinite) or 60..604800 (CDK: None, or 60 s to 7 days).
RECORD_AGE_RANGE = (60, 604_800)
# Kinesis and DynamoDB Streams only: concurrent batches per shard.
PARALLELIZATION_RANGE = (1, 10)
# Provisioned mode on a Kafka source (AWS: minimum 1..200, default 1; maximum 1..2000,
# default 200). Its minimum pollers are billed around the clock, records or not.
KAFKA_MIN_POLLERS_RANGE = (1, 200)
KAFKA_MAX_POLLERS_RANGE = (1, 2000)


def _within(name: str, label: str, value: int | None, bounds: tuple[int, int]) -> None:
    low, high = bounds
    if value is not None and not low <= value <= high:
        raise ValueError(f"{name}: {label} {value} is outside {low}..{high}")


def check_stream_mapping(
    name: str,
    *,
    batch_size: int,
    batching_window_seconds: int | None,
    retry_attempts: int | None,
    max_record_age_seconds: int | None,
    parallelization_factor: int | None,
    max_attempts: int | None,
) -> None:
    """`max_attempts` is the handler's own give-up (STREAM_MAX_ATTEMPTS): it must come before
    the mapping's, because the handler dead-letters the record itself, with its data and the
    reason, where the mapping's on-failure destination gets only the record's position."""
    _within(name, "batch_size", batch_size, BATCH_SIZE_RANGE)
    _within(name, "batching_window", batching_window_seconds, BATCHING_WINDOW_RANGE)
    _within(name, "retry_attempts", retry_attempts, RETRY_ATTEMPTS_RANGE)
    _within(name, "max_record_age", max_record_age_seconds, RECORD_AGE_RANGE)
    _within(name, "parallelization_factor", parallelization_factor, PARALLELIZATION_RANGE)
    if max_attempts is not None:
        if max_attempts < 1:
            raise ValueError(f"{name}: max_attempts {max_attempts} must be 1 or more")
        # Invocations of a failing record: the first plus `retry_attempts` retries.
        if retry_attempts is not None and max_attempts > retry_attempts + 1:
            raise ValueError(
                f"{name}: max_attempts {max_attempts} is over the mapping's "
                f"{retry_attempts + 1} invocations (retry_attempts {retry_attempts} + 1): the "
                "mapping would give the record up first, without its data or reason"
            )


def record_age_seconds(max_record_age: Duration | None) -> int | None:
    return None if max_record_age is None else int(max_record_age.to_seconds())


def check_record_age_within_retention(
    name: str, *, max_record_age_seconds: int | None, retention_seconds: int
) -> None:
    """A record is trimmed from the stream at its retention: a `max_record_age` past it never
    gives a record up (Lambda reads past the trimmed ones), and the on-failure queue would
    name records the stream no longer holds. None (infinite) is the caller's explicit choice."""
    if max_record_age_seconds is not None and max_record_age_seconds >= retention_seconds:
        raise ValueError(
            f"{name}: max_record_age {max_record_age_seconds} is not within the stream's "
            f"retention {retention_seconds} (seconds): records would be trimmed before the "
            "mapping gives them up to the on-failure queue"
        )


def check_kafka_pollers(name: str, *, min_pollers: int, max_pollers: int) -> None:
    """Kafka's error handling (retries, record age, bisect, partial batch responses) works in
    provisioned mode only, so a Kafka consumer always has pollers; these are AWS's bounds."""
    _within(name, "min_pollers", min_pollers, KAFKA_MIN_POLLERS_RANGE)
    _within(name, "max_pollers", max_pollers, KAFKA_MAX_POLLERS_RANGE)
    if min_pollers > max_pollers:
        raise ValueError(f"{name}: min_pollers {min_pollers} is over max_pollers {max_pollers}")
