"""How long records live, the same on every store: the limits a store is built with, the TTL a
write sets, and the overdue-work listing built on the pending one."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from exactly_once.errors import ConfigurationError
from exactly_once.stores.records import StoredRecord
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import MAX_RESULT_CAP_BYTES

DAY_S = 86_400
MIN_TTL_S = 60  # the fence floor (see the stores' `acquire`) needs a TTL longer than any skew
TTL_BEYOND_LEASE_S = 60  # a record's expiry always lies this far past its lease's end


def check_limits(record_ttl_s: int, failed_ttl_s: int, result_cap_bytes: int) -> None:
    if min(record_ttl_s, failed_ttl_s) < MIN_TTL_S:
        raise ConfigurationError(f"record and failed TTLs must be at least {MIN_TTL_S} s")
    if not 0 <= result_cap_bytes <= MAX_RESULT_CAP_BYTES:
        raise ConfigurationError(
            f"result_cap_bytes must be 0..{MAX_RESULT_CAP_BYTES}: a DynamoDB item holds "
            f"at most 400 KB, got {result_cap_bytes}"
        )


def record_ttl(now_s: int, record_ttl_s: int, lease_until_ms: int | None = None) -> int:
    """A record's expiry: never before its lease ends, so expiry can't free a live lock."""
    ttl = now_s + record_ttl_s
    if lease_until_ms is not None:
        ttl = max(ttl, lease_until_ms // 1000 + TTL_BEYOND_LEASE_S)
    return ttl


def overdue(
    pending: Callable[[Status], Iterator[StoredRecord]], now_ms: int, limit: int | None
) -> Iterator[StoredRecord]:
    """IN_PROGRESS records past the completion their holder expected (`expected_by`).

    Such work may still be well inside its lease, so the stuck listing would not show it yet.
    The pending listing is keyed on the lease's end, not on `expected_by`, so this reads every
    in-flight record and filters here: in-flight work is few records.
    """
    found = 0
    for record in pending(Status.IN_PROGRESS):
        if record.overdue(now_ms):
            yield record
            found += 1
            if limit is not None and found >= limit:
                return
