"""The handler's run under the key's lock, and what the record keeps of it.

Its own module because this is where exactly-once is decided for a request: the response is
stored only when final (2xx, 4xx but 408, 425, 429) and fits under the cap (else a summary),
anything that fails before completion (a raise, a malformed response, measuring it) leaves the
key FAILED and retryable rather than locked for the lease (but a step error whose retry would
skip or repeat a step's work: FAILED for good), a refused fenced write or
completion is a lost lease (409), a transaction that did not commit is reported so (503), and
a completion that could not be written still gives the work's true answer. The request flow
around it (key, caller, claim) is api.py's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exactly_once import observability
from exactly_once.effects import LeaseLost
from exactly_once.errors import (
    CommitFailed,
    CommitUnknown,
    StepOrderError,
    StepResultUnstorable,
    StepWriteRefused,
)
from exactly_once.held_lock import OnceLock
from exactly_once.http.config import ApiConfig
from exactly_once.http.context import RequestContext
from exactly_once.http.problems import generic_error, lease_lost, not_committed, outcome_unknown
from exactly_once.http.request import HttpRequest
from exactly_once.http.response import HttpResponse, encoded_size, is_final
from exactly_once.http.results import ApiOutcome, ApiResult
from exactly_once.stores.records import ErrorInfo

ApiHandler = Callable[[HttpRequest, RequestContext], Any]
# A retry of these would skip or repeat a step's work (StepOrderError), run a step whose
# effect happened again (StepResultUnstorable), or be refused the same way (StepWriteRefused):
# the key fails for a person to look at, as docs/steps.md says of every entry point.
FINAL_STEP_ERRORS = (StepOrderError, StepResultUnstorable, StepWriteRefused)


def run_locked(
    handler: ApiHandler,
    ctx: RequestContext,
    config: ApiConfig,
    lock: OnceLock,
    takeover: bool,
) -> ApiResult:
    """Run `handler` for the request whose key `lock` holds, and record its outcome."""
    extra = {"key": ctx.key, "fence": lock.fence, "attempt": lock.attempt}
    try:
        response = HttpResponse.from_handler(handler(ctx.request, ctx))
        # Inside the try: whatever fails before completion must leave the key retryable.
        stored, whole = storable(response, config)
    except LeaseLost as exc:  # a fenced effect was refused: a newer request owns the key
        observability.logger().warning("effect refused: lease lost", extra=extra)
        return lease_lost(ctx, str(exc))
    except BaseException as exc:  # incl. a malformed response: kept, the next try runs
        # ... but for a step error whose key must not run again (errors.py): FAILED for good,
        # and a retry gets 409 outcome-unknown until an operator resets the key.
        error = ErrorInfo.from_exception(exc, retryable=not isinstance(exc, FINAL_STEP_ERRORS))
        record_failure(lock, error, extra)
        if isinstance(exc, KeyboardInterrupt):
            raise
        observability.logger().warning(
            "handler raised; the key stays retryable"
            if error.retryable
            else "handler raised a step error; the key is FAILED for good",
            extra={**extra, "error": repr(exc)},
        )
        answer = generic_error(error.retryable)
        return ApiResult(ApiOutcome.FAILED, answer, ctx.key, lock.fence, takeover=takeover)
    if not is_final(response.status):  # 5xx, 408, 425, 429: the retry runs again
        error = ErrorInfo("HttpStatus", f"the handler answered {response.status}", True)
        record_failure(lock, error, extra)
        return ApiResult(ApiOutcome.FAILED, response, ctx.key, lock.fence, takeover=takeover)
    if not whole:
        observability.logger().warning(
            "response over the storage cap: a replay answers response-not-stored",
            extra={**extra, "cap": config.result_cap_bytes},
        )
    try:
        lock.succeed(stored)
    except LeaseLost:
        observability.logger().error(
            "LEASE LOST at completion: a newer request owns the key", extra=extra
        )
        return lease_lost(ctx, "completion refused: a newer request owns the key")
    except CommitFailed as exc:  # ctx.transaction's writes rolled back with the completion
        observability.logger().error(
            "the transaction did not commit; nothing happened",
            extra={**extra, "error": repr(exc)},
        )
        record_failure(lock, ErrorInfo.from_exception(exc, retryable=True), extra)
        return ApiResult(ApiOutcome.FAILED, not_committed(), ctx.key, lock.fence, takeover=takeover)
    except CommitUnknown as exc:  # committed or not: the record settles it
        observability.logger().error(
            "the transaction's outcome is unknown", extra={**extra, "error": repr(exc)}
        )
        return ApiResult(
            ApiOutcome.FAILED, outcome_unknown(), ctx.key, lock.fence, takeover=takeover
        )
    except Exception as exc:
        # The work happened and its answer is true: give it. The record stays IN_PROGRESS
        # until its lease ends (a retry meanwhile gets 409), then a retry runs again and
        # fenced effects refuse a second write.
        observability.logger().error(
            "completion could not be recorded", extra={**extra, "error": repr(exc)}
        )
        return ApiResult(
            ApiOutcome.PROCESSED,
            response,
            ctx.key,
            lock.fence,
            takeover=takeover,
            response_stored=False,
            completion_failed=True,
        )
    return ApiResult(
        ApiOutcome.PROCESSED,
        response,
        ctx.key,
        lock.fence,
        takeover=takeover,
        response_stored=whole,
    )


def storable(response: HttpResponse, config: ApiConfig) -> tuple[dict[str, Any], bool]:
    """What the record keeps, and whether that is the whole response (else a summary)."""
    stored = response.stored(config.response_headers)
    if encoded_size(stored) <= config.result_cap_bytes:
        return stored, True
    return response.summary(config.response_headers, config.result_cap_bytes), False


def record_failure(lock: OnceLock, error: ErrorInfo, extra: dict[str, Any]) -> None:
    """Keep the failure, retried like completion: a FAILED write lost to one throttle burst
    would keep every retry out (409) until the lease ends. If it never lands, the lease does."""
    try:
        lock.fail(error)
    except LeaseLost:
        observability.logger().warning("failure not recorded: lease lost", extra=extra)
    except Exception:
        observability.logger().exception("could not record the failure", extra=extra)
