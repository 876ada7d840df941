"""How long a lock is held before others may take it over.

The lease is the invocation's remaining time plus a safety margin: Lambda has been seen to stop
a function about 0.7 s after its timeout, and DynamoDB conditions use the caller's clock, so a
takeover must wait until the old invocation is certainly dead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol


class HasRemainingTime(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


@dataclass(frozen=True)
class LeasePolicy:
    margin_ms: int = 5_000
    max_ms: int | None = None  # cap, e.g. for very long function timeouts
    override_ms: int | None = None  # fixed lease regardless of the context
    default_ms: int = 60_000  # no Lambda context (local scripts): assume this much remaining time

    def lease_ms(self, context: Any | None = None) -> int:
        if self.override_ms is not None:
            return self.override_ms
        remaining = self.default_ms
        if context is not None and hasattr(context, "get_remaining_time_in_millis"):
            remaining = max(0, int(context.get_remaining_time_in_millis()))
        lease = remaining + self.margin_ms
        return min(lease, self.max_ms) if self.max_ms is not None else lease


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
