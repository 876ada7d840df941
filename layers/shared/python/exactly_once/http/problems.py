"""The answers an idempotent API gives instead of (or in place of) its handler's response:
the replay of a stored response, and every problem response (RFC 9457) with its outcome.

Its own module because these answers are the API's contract with its callers, the IETF
httpapi draft's on top of the store's: 400 for a missing or malformed key, 409 while the first
request with the key runs (Retry-After until its lease ends) or once it was superseded or
blocked, 422 for a key reused with another request, 503 when the store did not answer or the
transaction did not commit, 500 when the server is misconfigured or the handler failed. Each
says whether retrying with the same Idempotency-Key is safe. Kept together, they read as one
table of what a client may see; the request flow (api.py, locked_run.py) only picks one.
"""

from __future__ import annotations

import math
import time

from exactly_once import observability
from exactly_once.claims import Claim, ClaimStatus
from exactly_once.http.config import ApiConfig
from exactly_once.http.context import RequestContext
from exactly_once.http.response import HttpResponse, problem, replay
from exactly_once.http.results import ApiOutcome, ApiResult
from exactly_once.stores.records import StoredRecord


def generic_error(retryable: bool = True) -> HttpResponse:
    """The handler raised. Retryable: a retry runs the request again. Not (a step error that
    must not run again, http/locked_run.FINAL_STEP_ERRORS): the key is FAILED for good."""
    detail = (
        "The server could not complete the request. Retrying with the same Idempotency-Key "
        "is safe: it runs again."
        if retryable
        else "The server could not complete the request, and will not run it again with this "
        "Idempotency-Key: a retry is answered 409 outcome-unknown until an operator resets it."
    )
    return problem(500, "handler-failed", "The request failed", detail)


def not_committed() -> HttpResponse:
    """The transaction lent to the handler rolled back with the completion: nothing happened."""
    return problem(
        503,
        "not-committed",
        "The request's writes did not commit",
        "Nothing of this request happened. Retrying with the same Idempotency-Key is "
        "safe: it runs again.",
        headers={"Retry-After": "1"},
    )


def outcome_unknown() -> HttpResponse:
    """The completion's commit got no answer: committed or not, the record settles it."""
    return problem(
        503,
        "outcome-unknown",
        "The request's outcome is not known yet",
        "Its writes either committed with it or not at all. Retry with the same "
        "Idempotency-Key: it replays the response if they did, and runs again if not.",
        headers={"Retry-After": "1"},
    )


def not_http() -> ApiResult:
    return ApiResult(
        ApiOutcome.BAD_REQUEST,
        problem(400, "not-http", "Not an HTTP request", "the event has no HTTP method"),
    )


def store_unavailable(key: str) -> ApiResult:
    """The claim got no answer from the store (throttled past the retries, or down)."""
    return ApiResult(
        ApiOutcome.UNAVAILABLE,
        problem(
            503,
            "store-unavailable",
            "Try again shortly",
            "The idempotency store did not answer; nothing ran. Retry with the same key.",
            headers={"Retry-After": "1"},
        ),
        key=key,
    )


def refused(claimed: Claim, key: str, config: ApiConfig) -> ApiResult:
    """The key was not acquired: replay its stored response, or say why not (422, 409)."""
    record = claimed.record
    status = claimed.status
    if status is ClaimStatus.COMPLETED:
        stored = record.result if record else None
        return ApiResult(ApiOutcome.REPLAYED, replay(stored, config.result_cap_bytes), key)
    if status is ClaimStatus.MISMATCH:
        return ApiResult(
            ApiOutcome.MISMATCH,
            problem(
                422,
                "key-reused",
                "Idempotency-Key reused",
                f"This {config.header} was already used for a different request (method, path, "
                "query or body). Use a new key for a new request.",
            ),
            key,
        )
    if status is ClaimStatus.FAILED:
        return ApiResult(
            ApiOutcome.BLOCKED,
            problem(
                409,
                "outcome-unknown",
                "An earlier request with this key stopped before it finished",
                "It may have taken effect, so it does not run again (takeover is blocked for "
                "this API, or its steps cannot go on): an operator must check it and reset "
                "the key; until then every retry gets this answer.",
            ),
            key,
        )
    return ApiResult(
        ApiOutcome.CONFLICT,
        problem(
            409,
            "request-in-progress",
            "A request with this key is still being processed",
            "Retry after the Retry-After seconds with the same key and the same request.",
            headers={"Retry-After": str(_retry_after_s(record))},
        ),
        key,
    )


def _retry_after_s(record: StoredRecord | None) -> int:
    """Until the holder's lease ends (then it has finished, or its key can be taken over)."""
    lease_end = record.lease_expires_at_ms if record else None
    if lease_end is None:
        return 1
    return max(1, math.ceil((lease_end - time.time() * 1000) / 1000))


def lease_lost(ctx: RequestContext, reason: str) -> ApiResult:
    return ApiResult(
        ApiOutcome.LEASE_LOST,
        problem(
            409,
            "lease-lost",
            "This request ran past its lease and was superseded",
            "A newer request with the same key owns it now; retry with the same key to get "
            f"its response. ({reason})",
            headers={"Retry-After": "1"},
        ),
        ctx.key,
        ctx.fence,
    )


def bad_key(header: str, which: str, detail: str) -> ApiResult:
    title = f"{header} {'is required' if which == 'missing' else 'is not valid'}"
    return ApiResult(ApiOutcome.BAD_REQUEST, problem(400, f"key-{which}", title, detail))


def misconfigured(why: str) -> ApiResult:
    observability.logger().error("cannot guard the request", extra={"why": why})
    return ApiResult(
        ApiOutcome.MISCONFIGURED,
        problem(
            500,
            "server-misconfigured",
            "The server is misconfigured",
            "Nothing ran. The operator has been told in the function's logs.",
        ),
    )
