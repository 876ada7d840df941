"""How long a lock is held before others may take it over.

The lease is the invocation's remaining time plus a safety margin: Lambda has been seen to stop
a function about 0.7 s after its timeout, and DynamoDB conditions use the caller's clock, so a
takeover must wait until the old invocation is certainly dead.

Such a lease strands the key for the whole timeout when its holder dies early (out of memory):
on a 10-minute function both of Lambda's async retries would find it in progress. So a lease
longer than the heartbeat lease (`heartbeat_ms`, LEASE_HEARTBEAT_MS, default 30 s) is held as
that short lease, renewed in the background while the holder lives, never past the long lease's
end (heartbeat.py). LEASE_HEARTBEAT=off keeps the long lease as it is.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Protocol

from exactly_once.errors import ConfigurationError

DEFAULT_HEARTBEAT_MS = 30_000
MIN_HEARTBEAT_MS = 1_000  # renewed every third of it: shorter would be mostly renewals
HEARTBEAT_MODES = ("auto", "off")


class HasRemainingTime(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


@dataclass(frozen=True)
class LeasePolicy:
    margin_ms: int = 5_000
    max_ms: int | None = None  # cap, e.g. for very long function timeouts
    override_ms: int | None = None  # fixed lease regardless of the context
    default_ms: int = 60_000  # no Lambda context (local scripts): assume this much remaining time
    # Leases longer than this are held as this, renewed while the holder lives; None: never.
    heartbeat_ms: int | None = DEFAULT_HEARTBEAT_MS

    def __post_init__(self) -> None:
        if self.heartbeat_ms is not None and self.heartbeat_ms < MIN_HEARTBEAT_MS:
            raise ConfigurationError(
                f"the heartbeat lease must be at least {MIN_HEARTBEAT_MS} ms, "
                f"got {self.heartbeat_ms} (None turns the heartbeat off)"
            )

    def lease_ms(self, context: Any | None = None) -> int:
        if self.override_ms is not None:
            return self.override_ms
        remaining = self.default_ms
        if context is not None and hasattr(context, "get_remaining_time_in_millis"):
            remaining = max(0, int(context.get_remaining_time_in_millis()))
        lease = remaining + self.margin_ms
        return min(lease, self.max_ms) if self.max_ms is not None else lease


def heartbeat_ms_from_env() -> int | None:
    """LeasePolicy.heartbeat_ms from LEASE_HEARTBEAT (auto | off) and LEASE_HEARTBEAT_MS.

    Strict: a misspelt mode or a non-integer lease is a ConfigurationError, never a silent
    default (an unnoticed "of" would keep long leases stranding keys)."""
    mode = (os.environ.get("LEASE_HEARTBEAT") or "auto").strip().lower()
    if mode not in HEARTBEAT_MODES:
        raise ConfigurationError(
            f"LEASE_HEARTBEAT must be one of {', '.join(HEARTBEAT_MODES)}, "
            f"got {os.environ.get('LEASE_HEARTBEAT')!r}"
        )
    raw = (os.environ.get("LEASE_HEARTBEAT_MS") or "").strip()
    try:
        lease = int(raw) if raw else DEFAULT_HEARTBEAT_MS
    except ValueError as exc:
        raise ConfigurationError(f"LEASE_HEARTBEAT_MS must be an integer, got {raw!r}") from exc
    if lease < MIN_HEARTBEAT_MS:
        raise ConfigurationError(f"LEASE_HEARTBEAT_MS must be at least {MIN_HEARTBEAT_MS}")
    return None if mode == "off" else lease


def remaining_ms(context: Any) -> float:
    """The invocation's time left; infinite without a Lambda context (a local script)."""
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        return float(context.get_remaining_time_in_millis())
    return math.inf


def owner(context: Any) -> str:
    """Who holds a lock, for people reading the record: function, request id and this process's
    instance id (lifecycle.instance_id), so processes sharing a request's name (Managed
    Instances) or restored from one snapshot (SnapStart) never look like one holder."""
    from exactly_once.lifecycle import instance_id

    function = getattr(context, "function_name", None) or "local"
    request = getattr(context, "aws_request_id", None) or "-"
    return f"{function}:{request}:{instance_id()}"
