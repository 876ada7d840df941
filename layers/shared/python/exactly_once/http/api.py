"""`@idempotent_api`: an API Gateway (REST or HTTP API) or function URL handler whose
state-changing requests run once per Idempotency-Key, with the response replayed after.

The semantics are the IETF httpapi draft's: 400 for a missing or malformed key, 409 while the
first request with the key is still running, 422 for a key reused with another request. On top
of the draft, from the store: completion is fenced (a request that outlived its lease cannot
overwrite its successor's response), keys are scoped per authenticated caller, 2xx and 4xx
are final and 5xx, the "come back later" 4xx (408, 425, 429) or a raised error are kept FAILED
and retryable (http_response.is_final).
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from exactly_once import lifecycle, observability
from exactly_once.effects import LeaseLost
from exactly_once.errors import CommitFailed, CommitUnknown
from exactly_once.http.caller import CallerOf, authorized_caller
from exactly_once.http.config import ApiConfig
from exactly_once.http.context import RequestContext
from exactly_once.http.fingerprint import request_fingerprint
from exactly_once.http.keys import InvalidKey, parse_key, scoped_key
from exactly_once.http.request import HttpRequest
from exactly_once.http.response import HttpResponse, encoded_size, is_final, problem, replay
from exactly_once.lease import LeasePolicy, owner
from exactly_once.once_lock import Claim, ClaimStatus, OnceLock, claim
from exactly_once.stores.protocol import Store, open_store
from exactly_once.stores.records import ErrorInfo, StoredRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ApiHandler = Callable[[HttpRequest, RequestContext], Any]


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


def _generic_error() -> HttpResponse:
    return problem(
        500,
        "handler-failed",
        "The request failed",
        "The server could not complete the request. Retrying with the same Idempotency-Key "
        "is safe: it runs again.",
    )


class IdempotentApi:
    """The Lambda handler: `api(event, context) -> API Gateway proxy response`.

    Configuration is read on the first invocation (not at import) and whenever the
    environment changes. It never raises: every request gets an HTTP answer.
    """

    def __init__(
        self,
        handler: ApiHandler,
        overrides: dict[str, Any],
        caller: CallerOf | None = None,
        dynamodb_client: DynamoDBClient | None = None,
    ) -> None:
        functools.update_wrapper(self, handler)
        self.handler = handler
        self.overrides = overrides
        self.caller = caller or authorized_caller
        self._dynamodb_client = dynamodb_client
        self._store: tuple[ApiConfig, Store] | None = None
        self._lock = threading.Lock()
        self._generation = lifecycle.generation()
        self.last_result: ApiResult | None = None  # for local tools and tests

    def configured(self) -> tuple[ApiConfig, Store]:
        config = ApiConfig.resolve(self.overrides)
        if self._generation != lifecycle.generation():  # a clone: the lock may be held forever
            self._generation = lifecycle.generation()
            self._lock = threading.Lock()
            self._store = None
        with self._lock:
            if self._store is None or self._store[0] != config:
                store = open_store(config, self._dynamodb_client)
                self._store = (config, store)
            return self._store

    def __call__(self, event: Any, context: Any = None) -> dict[str, Any]:
        request = HttpRequest.from_event(event)
        try:
            result = self._handle(request, context)
        except BaseException as exc:  # the last line of defence: an answer, never a raise
            if isinstance(exc, KeyboardInterrupt):
                raise
            observability.logger().exception(
                "request failed unexpectedly", extra={"request_id": request.request_id}
            )
            result = ApiResult(ApiOutcome.FAILED, _generic_error())
        self.last_result = result
        self._observe(request, result)
        return result.response.to_lambda()

    def _handle(self, request: HttpRequest, context: Any) -> ApiResult:
        try:
            config, store = self.configured()
        except Exception as exc:
            observability.logger().exception("API handler is misconfigured")
            return _misconfigured(f"configuration: {exc}")
        if not request.method:
            return ApiResult(
                ApiOutcome.BAD_REQUEST,
                problem(400, "not-http", "Not an HTTP request", "the event has no HTTP method"),
            )
        if request.method not in config.methods:
            return self._run_unguarded(request, context)
        header = request.header(config.header)
        if header is None:
            if not config.key_required:
                return self._run_unguarded(request, context)
            return _bad_key(config.header, "missing", f"send an {config.header} header")
        try:
            key = parse_key(header)
        except InvalidKey as exc:
            return _bad_key(config.header, "invalid", str(exc))
        try:
            caller = self.caller(request)
        except Exception as exc:
            observability.logger().exception("the caller function raised")
            return _misconfigured(f"caller: {type(exc).__name__}")
        if not caller:
            observability.logger().error(
                "no authenticated caller: configure an authorizer on the route, or pass "
                "caller= to idempotent_api (keys are scoped per caller)"
            )
            return _misconfigured("no authenticated caller to scope the key to")
        record_key = scoped_key(caller, key)
        try:
            claimed = claim(
                store,
                config.scope,
                record_key,
                lease_ms=config.lease.lease_ms(context),
                owner=owner(context),
                fingerprint=request_fingerprint(request, config.fingerprint_headers),
                block_takeover=config.block_takeover,
                lambda_context=context,
                heartbeat_ms=config.lease.heartbeat_ms,  # a dead holder frees the key soon
            )
        except Exception as exc:  # throttled past botocore's retries, or DynamoDB unavailable
            observability.logger().error(
                "acquire failed", extra={"key": record_key, "error": repr(exc)}
            )
            return ApiResult(
                ApiOutcome.UNAVAILABLE,
                problem(
                    503,
                    "store-unavailable",
                    "Try again shortly",
                    "The idempotency store did not answer; nothing ran. Retry with the same key.",
                    headers={"Retry-After": "1"},
                ),
                key=record_key,
            )
        if not claimed.acquired:
            return _refused(claimed, record_key, config)
        lock = claimed.lock
        ctx = RequestContext(
            request_id=request.request_id,
            key=record_key,
            fence=lock.fence,
            attempt=lock.attempt,
            idempotency_key=key,
            caller=caller,
            request=request,
            lambda_context=context,
            _store=store,
            _lock=lock.store_lock,
        )
        try:
            return self._run(ctx, config, lock, claimed.takeover)
        finally:
            lock.abandon()  # a transaction still open here has no outcome to commit with

    def _run_unguarded(self, request: HttpRequest, context: Any) -> ApiResult:
        """No key to keep: the handler runs as it would without this decorator."""
        ctx = RequestContext(
            request_id=request.request_id,
            key="",
            fence=0,
            attempt=1,
            idempotency_key="",
            caller="",
            request=request,
            lambda_context=context,
        )
        try:
            response = HttpResponse.from_handler(self.handler(request, ctx))
        except Exception:
            observability.logger().exception("handler raised", extra={"idempotent": False})
            return ApiResult(ApiOutcome.FAILED, _generic_error())
        return ApiResult(ApiOutcome.WITHOUT_KEY, response)

    def _run(
        self,
        ctx: RequestContext,
        config: ApiConfig,
        lock: OnceLock,
        takeover: bool,
    ) -> ApiResult:
        extra = {"key": ctx.key, "fence": lock.fence, "attempt": lock.attempt}
        try:
            response = HttpResponse.from_handler(self.handler(ctx.request, ctx))
            # Inside the try: whatever fails before completion must leave the key retryable.
            stored, whole = _storable(response, config)
        except LeaseLost as exc:  # a fenced effect was refused: a newer request owns the key
            observability.logger().warning("effect refused: lease lost", extra=extra)
            return _lease_lost(ctx, str(exc))
        except BaseException as exc:  # incl. a malformed response: kept, the next try runs
            error = ErrorInfo.from_exception(exc, retryable=True)
            _record_failure(lock, error, extra)
            if isinstance(exc, KeyboardInterrupt):
                raise
            observability.logger().warning(
                "handler raised; the key stays retryable", extra={**extra, "error": repr(exc)}
            )
            return ApiResult(
                ApiOutcome.FAILED, _generic_error(), ctx.key, lock.fence, takeover=takeover
            )
        if not is_final(response.status):  # 5xx, 408, 425, 429: the retry runs again
            error = ErrorInfo("HttpStatus", f"the handler answered {response.status}", True)
            _record_failure(lock, error, extra)
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
            return _lease_lost(ctx, "completion refused: a newer request owns the key")
        except CommitFailed as exc:  # ctx.transaction's writes rolled back with the completion
            observability.logger().error(
                "the transaction did not commit; nothing happened",
                extra={**extra, "error": repr(exc)},
            )
            _record_failure(lock, ErrorInfo.from_exception(exc, retryable=True), extra)
            not_committed = problem(
                503,
                "not-committed",
                "The request's writes did not commit",
                "Nothing of this request happened. Retrying with the same Idempotency-Key is "
                "safe: it runs again.",
                headers={"Retry-After": "1"},
            )
            return ApiResult(
                ApiOutcome.FAILED, not_committed, ctx.key, lock.fence, takeover=takeover
            )
        except CommitUnknown as exc:  # committed or not: the record settles it
            observability.logger().error(
                "the transaction's outcome is unknown", extra={**extra, "error": repr(exc)}
            )
            unknown = problem(
                503,
                "outcome-unknown",
                "The request's outcome is not known yet",
                "Its writes either committed with it or not at all. Retry with the same "
                "Idempotency-Key: it replays the response if they did, and runs again if not.",
                headers={"Retry-After": "1"},
            )
            return ApiResult(ApiOutcome.FAILED, unknown, ctx.key, lock.fence, takeover=takeover)
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

    def _observe(self, request: HttpRequest, result: ApiResult) -> None:
        """One log line and one EMF document per request; neither may cost the request."""
        try:
            config = self._store[0] if self._store else None
            observability.logger().info(
                "request done",
                extra={
                    "request_id": request.request_id,
                    "outcome": result.outcome.value,
                    "status": result.response.status,
                    "key": result.key,
                    "fence": result.fence,
                },
            )
            counts = {name: int(result.outcome is o) for o, name in METRIC_NAMES.items()}
            counts["Takeovers"] = int(result.takeover)
            counts["ResponseNotStored"] = int(not result.response_stored)
            counts["CompletionFailed"] = int(result.completion_failed)
            observability.emit_counts("api", config.scope if config else "unconfigured", counts)
        except Exception:
            observability.logger().exception("could not log or emit metrics")


def _refused(claimed: Claim, key: str, config: ApiConfig) -> ApiResult:
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
                "It may have taken effect. Takeover is blocked for this API, so an operator "
                "must check it and reset the key; until then every retry gets this answer.",
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


def _lease_lost(ctx: RequestContext, reason: str) -> ApiResult:
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


def _bad_key(header: str, which: str, detail: str) -> ApiResult:
    title = f"{header} {'is required' if which == 'missing' else 'is not valid'}"
    return ApiResult(ApiOutcome.BAD_REQUEST, problem(400, f"key-{which}", title, detail))


def _misconfigured(why: str) -> ApiResult:
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


def _storable(response: HttpResponse, config: ApiConfig) -> tuple[dict[str, Any], bool]:
    """What the record keeps, and whether that is the whole response (else a summary)."""
    stored = response.stored(config.response_headers)
    if encoded_size(stored) <= config.result_cap_bytes:
        return stored, True
    return response.summary(config.response_headers, config.result_cap_bytes), False


def _record_failure(lock: OnceLock, error: ErrorInfo, extra: dict[str, Any]) -> None:
    """Keep the failure, retried like completion: a FAILED write lost to one throttle burst
    would keep every retry out (409) until the lease ends. If it never lands, the lease does."""
    try:
        lock.fail(error)
    except LeaseLost:
        observability.logger().warning("failure not recorded: lease lost", extra=extra)
    except Exception:
        observability.logger().exception("could not record the failure", extra=extra)


def idempotent_api(
    *,
    header: str | None = None,
    key_required: bool | None = None,
    methods: Sequence[str] | None = None,
    caller: CallerOf | None = None,
    fingerprint_headers: Sequence[str] | None = None,
    response_headers: Sequence[str] | None = None,
    table_name: str | None = None,
    dsn: str | None = None,
    scope: str | None = None,
    block_takeover: bool | None = None,
    lease: LeasePolicy | None = None,
    result_cap_bytes: int | None = None,
    dynamodb_client: DynamoDBClient | None = None,
) -> Callable[[ApiHandler], IdempotentApi]:
    """Make `handler(request, ctx)` an idempotent API Gateway handler: `@idempotent_api()`.

    `caller(request)` names who is calling (default: the authorizer's principal); keys are
    scoped to it. `methods`: where a key is honoured (POST, PATCH). `fingerprint_headers`:
    headers that make two requests different. `response_headers`: headers a replay repeats
    (default all). Keyword arguments override the environment (IDEMPOTENCY_TABLE or
    IDEMPOTENCY_DSN, API_SCOPE, BLOCK_EXPIRED_LEASES, IDEMPOTENCY_KEY_REQUIRED,
    LEASE_MARGIN_MS, RECORD_TTL_SECONDS, ...).
    """
    overrides: dict[str, Any] = {
        "header": header,
        "key_required": key_required,
        "methods": tuple(methods) if methods is not None else None,
        "fingerprint_headers": tuple(fingerprint_headers)
        if fingerprint_headers is not None
        else None,
        "response_headers": tuple(response_headers) if response_headers is not None else None,
        "table_name": table_name,
        "dsn": dsn,
        "scope": scope,
        "block_takeover": block_takeover,
        "lease": lease,
        "result_cap_bytes": result_cap_bytes,
    }

    def wrap(fn: ApiHandler) -> IdempotentApi:
        return IdempotentApi(fn, overrides, caller, dynamodb_client)

    return wrap
