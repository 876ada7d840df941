"""What one request to an idempotent API came to: its outcome, the answer given, and the
metric each outcome is counted under.

Its own module because every other part of the HTTP room speaks in these terms: the request
flow (api.py), the handler's run under the lock (locked_run.py) and the answers given instead
of running it (problems.py) each hand back an `ApiResult`, and the handler's `_observe`
counts it. Keeping the vocabulary apart lets those import it without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from exactly_once.http.response import HttpResponse


class ApiOutcome(StrEnum):
    PROCESSED = "processed"  # ran; its response is stored (2xx, 4xx but 408, 425, 429)
    REPLAYED = "replayed"  # the stored response, again; nothing ran
    CONFLICT = "conflict"  # 409: the first request with the key is still running
    MISMATCH = "mismatch"  # 422: the key was used for another request
    BAD_REQUEST = "bad_request"  # 400: no key, or not a usable one
    FAILED = "failed"  # 5xx, 408, 425, 429 or an exception: kept FAILED, the next try runs
    LEASE_LOST = "lease_lost"  # 409: ran past its lease and a newer request owns the key
    BLOCKED = "blocked"  # 409: an earlier holder's lease expired; takeover is blocked
    UNAVAILABLE = "unavailable"  # 503: the store could not be reached (throttled, down)
    WITHOUT_KEY = "without_key"  # ran without idempotency (other method, optional key absent)
    MISCONFIGURED = "misconfigured"  # 500: configuration or caller identity missing


METRIC_NAMES = {
    ApiOutcome.PROCESSED: "Processed",
    ApiOutcome.REPLAYED: "Replayed",
    ApiOutcome.CONFLICT: "Conflict",
    ApiOutcome.MISMATCH: "Mismatch",
    ApiOutcome.BAD_REQUEST: "BadRequest",
    ApiOutcome.FAILED: "Failed",
    ApiOutcome.LEASE_LOST: "LeaseLost",
    ApiOutcome.BLOCKED: "Blocked",
    ApiOutcome.UNAVAILABLE: "StoreUnavailable",
    ApiOutcome.WITHOUT_KEY: "WithoutKey",
    ApiOutcome.MISCONFIGURED: "Misconfigured",
}


@dataclass(frozen=True)
class ApiResult:
    """What one request came to; kept on the handler as `last_result` for tools and tests."""

    outcome: ApiOutcome
    response: HttpResponse
    key: str | None = None
    fence: int | None = None
    takeover: bool = False
    response_stored: bool = True  # False: only a summary fit under the cap
    completion_failed: bool = False
