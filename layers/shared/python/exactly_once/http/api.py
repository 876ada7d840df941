"""`@idempotent_api`: an API Gateway (REST or HTTP API) or function URL handler whose
state-changing requests run once per Idempotency-Key, with the response replayed after.

The semantics are the IETF httpapi draft's: 400 for a missing or malformed key, 409 while the
first request with the key is still running, 422 for a key reused with another request. On top
of the draft, from the store: completion is fenced (a request that outlived its lease cannot
overwrite its successor's response), keys are scoped per authenticated caller, 2xx and 4xx
are final and 5xx, the "come back later" 4xx (408, 425, 429) or a raised error are kept FAILED
and retryable (response.py `is_final`).

This module is the request flow: configuration, the key and the caller it is scoped to, the
claim, one log line and one metric document per request. What it came to is results.py's
vocabulary, the answers given instead of running the handler are problems.py's, and the run
under the lock is locked_run.py's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from exactly_once import lifecycle, observability
from exactly_once.claims import claim
from exactly_once.http.caller import CallerOf, authorized_caller
from exactly_once.http.config import ApiConfig
from exactly_once.http.context import RequestContext
from exactly_once.http.fingerprint import request_fingerprint
from exactly_once.http.keys import InvalidKey, parse_key, scoped_key
from exactly_once.http.locked_run import ApiHandler, run_locked
from exactly_once.http.problems import (
    bad_key,
    generic_error,
    misconfigured,
    not_http,
    refused,
    store_unavailable,
)
from exactly_once.http.request import HttpRequest
from exactly_once.http.response import HttpResponse
from exactly_once.http.results import METRIC_NAMES, ApiOutcome, ApiResult
from exactly_once.lease import LeasePolicy, owner
from exactly_once.stores.protocol import Store, open_store

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["ApiHandler", "ApiOutcome", "ApiResult", "IdempotentApi", "idempotent_api"]


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
            result = ApiResult(ApiOutcome.FAILED, generic_error())
        self.last_result = result
        self._observe(request, result)
        return result.response.to_lambda()

    def _handle(self, request: HttpRequest, context: Any) -> ApiResult:
        try:
            config, store = self.configured()
        except Exception as exc:
            observability.logger().exception("API handler is misconfigured")
            return misconfigured(f"configuration: {exc}")
        if not request.method:
            return not_http()
        if request.method not in config.methods:
            return self._run_unguarded(request, context)
        header = request.header(config.header)
        if header is None:
            if not config.key_required:
                return self._run_unguarded(request, context)
            return bad_key(config.header, "missing", f"send an {config.header} header")
        try:
            key = parse_key(header)
        except InvalidKey as exc:
            return bad_key(config.header, "invalid", str(exc))
        try:
            caller = self.caller(request)
        except Exception as exc:
            observability.logger().exception("the caller function raised")
            return misconfigured(f"caller: {type(exc).__name__}")
        if not caller:
            observability.logger().error(
                "no authenticated caller: configure an authorizer on the route, or pass "
                "caller= to idempotent_api (keys are scoped per caller)"
            )
            return misconfigured("no authenticated caller to scope the key to")
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
            return store_unavailable(record_key)
        if not claimed.acquired:
            return refused(claimed, record_key, config)
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
            return run_locked(self.handler, ctx, config, lock, claimed.takeover)
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
            return ApiResult(ApiOutcome.FAILED, generic_error())
        return ApiResult(ApiOutcome.WITHOUT_KEY, response)

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
