"""One SQS record through the idempotency state machine.

Every path ends in a RecordResult: succeeded, reported as failed (SQS redelivers it), or sent
to the DLQ with its reason. Nothing here raises to the batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from exactly_once import clients, observability
from exactly_once.codec import fingerprint
from exactly_once.config import ConsumerConfig
from exactly_once.dead_letter import send_to_dead_letter_queue
from exactly_once.effects import LeaseLost
from exactly_once.errors import PermanentError, UnusableInput
from exactly_once.keys import KeySpec, resolve_key
from exactly_once.messages import message_id, parse_body, queue_url_from_arn, replay_nonce
from exactly_once.outcomes import Outcome, RecordResult
from exactly_once.records import AcquireStatus, ErrorInfo, Lock, StoredRecord
from exactly_once.store import IdempotencyStore

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

Handler = Callable[[Any, "RecordContext"], Any]
MAX_VISIBILITY_S = 43_200
COMPLETE_ATTEMPTS = 4  # each is botocore's own retries; bounded even with no Lambda deadline


@dataclass
class RecordContext:
    """What the business function learns about the record it runs for."""

    message_id: str
    key: str
    fence: int  # strictly increases per key across holders: pass it downstream as a fence
    attempt: int
    record: dict[str, Any]
    lambda_context: Any = None
    _store: IdempotencyStore | None = field(default=None, repr=False)
    _lock: Lock | None = field(default=None, repr=False)

    @property
    def scope(self) -> str:
        """The consumer's key space (the record id is "{scope}#{key}")."""
        if self._lock is None:
            return ""
        return self._lock.record_id[: -len(self.key) - 1] if self.key else self._lock.record_id

    def extend_lease(self, lease_ms: int) -> bool:
        """Renew the lock for work that outlives its lease; False means it was lost."""
        if self._store is None or self._lock is None:
            return False
        result = self._store.extend(self._lock, lease_ms)
        if result.ok and result.lock is not None:
            self._lock = result.lock
        return result.ok


class RecordProcessor:
    def __init__(
        self,
        handler: Handler,
        key: KeySpec,
        config: ConsumerConfig,
        store: IdempotencyStore,
        sqs: SQSClient | None = None,
    ) -> None:
        self.handler = handler
        self.key = key
        self.config = config
        self.store = store
        self._sqs = sqs

    @property
    def sqs(self) -> SQSClient:
        if self._sqs is None:
            self._sqs = clients.sqs()
        return self._sqs

    def process(self, record: Any, context: Any, margin_ms: float = 0.0) -> RecordResult:
        """`margin_ms`: a record is not started with less time than this left."""
        mid = message_id(record)
        try:
            return self._process(record, mid, context, margin_ms)
        except BaseException as exc:  # the last line of defence: report, never raise to the batch
            if isinstance(exc, KeyboardInterrupt):
                raise
            observability.logger().exception(
                "record failed unexpectedly", extra={"message_id": mid}
            )
            return RecordResult(mid, Outcome.ERROR, True, reason=f"{type(exc).__name__}: {exc}")

    def key_of(self, record: Any) -> str | None:
        """The record's idempotency key, or None when it has none (it then runs on its own)."""
        try:
            return resolve_key(self.key, record, parse_body(record, self.config.raw_body))
        except BaseException as exc:  # a key function's CancelledError must not fail the batch
            if isinstance(exc, KeyboardInterrupt):
                raise
            return None

    def _identify(self, record: dict[str, Any]) -> tuple[Any, str, str | None]:
        """Body, key and fingerprint. Every failure here comes from the input: permanent.

        Valid JSON can still break code (deep nesting, lone surrogates, a key function that
        raises); retrying cannot change the input, so such a record goes to the DLQ at once.
        """
        try:
            body = parse_body(record, self.config.raw_body)
            key = resolve_key(self.key, record, body)
            fp = (
                fingerprint(body, self.config.fingerprint_fields)
                if self.config.fingerprint
                else None
            )
        except PermanentError:
            raise
        except Exception as exc:
            raise UnusableInput(f"{type(exc).__name__}: {exc}") from exc
        return body, key, fp

    def deferred(self, record: Any, reason: str) -> RecordResult:
        return RecordResult(message_id(record), Outcome.DEFERRED, True, reason=reason)

    def _process(self, record: Any, mid: str, context: Any, margin_ms: float) -> RecordResult:
        if not isinstance(record, dict) or not mid:
            return RecordResult(mid, Outcome.ERROR, True, reason="malformed record: no messageId")
        if remaining_ms(context) < margin_ms:
            return self.deferred(record, "too close to the invocation deadline")
        try:
            body, key, fp = self._identify(record)
        except PermanentError as exc:  # NonJsonBody, MissingKey...: no key, so no record to keep
            return self._dead_letter(
                record, mid, None, ErrorInfo.from_exception(exc, retryable=False), 0
            )
        try:
            acquisition = self.store.acquire(
                self.config.scope,
                key,
                lease_ms=self.config.lease.lease_ms(context),
                owner=_owner(context),
                fingerprint=fp,
                block_takeover=self.config.block_takeover,
                replay_nonce=replay_nonce(record),
            )
        except Exception as exc:  # throttled past botocore's retries, or DynamoDB unavailable
            return self._infrastructure_error(mid, key, "acquire", exc)

        status = acquisition.status
        if status is AcquireStatus.ALREADY_COMPLETED:
            return RecordResult(mid, Outcome.DUPLICATE, False, key=key)
        if status is AcquireStatus.IN_PROGRESS:
            return self._in_progress(record, mid, key, acquisition.record)
        if status is AcquireStatus.FINGERPRINT_MISMATCH:
            error = ErrorInfo(
                "FingerprintMismatch",
                f"key {key!r} was already used for a different payload",
                retryable=False,
            )
            return self._dead_letter(record, mid, key, error, _attempts(acquisition.record))
        if status is AcquireStatus.FAILED_PERMANENTLY:
            stored = acquisition.record
            error = (stored.error if stored else None) or ErrorInfo("Failed", "", False)
            nonce = stored.replay_nonce if stored else None
            return self._dead_letter(record, mid, key, error, _attempts(stored), nonce=nonce)

        assert acquisition.lock is not None
        ctx = RecordContext(
            mid,
            key,
            acquisition.lock.fence,
            acquisition.lock.attempt,
            record,
            context,
            self.store,
            acquisition.lock,
        )
        return self._run(ctx, body, acquisition.takeover, context, margin_ms)

    def _run(
        self, ctx: RecordContext, body: Any, takeover: bool, context: Any, margin_ms: float
    ) -> RecordResult:
        record, mid, key, lock = ctx.record, ctx.message_id, ctx.key, ctx._lock
        assert lock is not None
        try:
            result = self.handler(body, ctx)
        except LeaseLost as exc:  # a fenced effect was refused: a newer holder owns the record
            observability.logger().warning(
                "effect refused: lease lost", extra={"message_id": mid, "key": key}
            )
            return RecordResult(mid, Outcome.LEASE_LOST, True, key=key, reason=str(exc))
        except PermanentError as exc:
            error = ErrorInfo.from_exception(exc, retryable=False)
            failed = self._fail(ctx, error)
            if failed is None:
                return RecordResult(mid, Outcome.LEASE_LOST, True, key=key, reason=str(exc))
            return self._dead_letter(
                record, mid, key, error, lock.attempt, takeover=takeover, nonce=failed
            )
        except BaseException as exc:  # CancelledError, a library's SystemExit: this record only
            self._fail(ctx, ErrorInfo.from_exception(exc, retryable=True))
            if isinstance(exc, KeyboardInterrupt):
                raise
            observability.logger().warning(
                "consumer raised; the record will be retried",
                extra={"message_id": mid, "key": key, "error": repr(exc), "attempt": lock.attempt},
            )
            return RecordResult(
                mid,
                Outcome.FAILED,
                True,
                key=key,
                reason=repr(exc),
                fence=lock.fence,
                takeover=takeover,
            )
        return self._complete(ctx, result, takeover, context, margin_ms)

    def _complete(
        self, ctx: RecordContext, result: Any, takeover: bool, context: Any, margin_ms: float
    ) -> RecordResult:
        """Record completion, retrying past botocore's own retries: at most COMPLETE_ATTEMPTS
        times, and only while the invocation has time left.

        The work has happened; losing the completion would let a later takeover run it again.
        Bounded all the same, so a local script without a Lambda context cannot spin forever.
        """
        assert ctx._lock is not None
        delay = 0.1
        for attempt in range(1, COMPLETE_ATTEMPTS + 1):
            try:
                written = self.store.complete(ctx._lock, result)
                break
            except Exception as exc:
                last = attempt == COMPLETE_ATTEMPTS
                if last or remaining_ms(context) < margin_ms / 2 + delay * 1000:
                    observability.logger().error(
                        "completion could not be recorded; the record stays IN_PROGRESS until "
                        "its lease expires and may then run again",
                        extra={"message_id": ctx.message_id, "key": ctx.key, "error": repr(exc)},
                    )
                    return RecordResult(
                        ctx.message_id,
                        Outcome.ERROR,
                        True,
                        key=ctx.key,
                        reason=f"complete: {exc!r}",
                        fence=ctx.fence,
                        takeover=takeover,
                    )
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        if not written.ok:
            holder = written.current
            observability.logger().error(
                "LEASE LOST at completion: the work ran, but another holder owns the record now",
                extra={
                    "message_id": ctx.message_id,
                    "key": ctx.key,
                    "fence": ctx.fence,
                    "holder_fence": holder.fence if holder else None,
                    "holder_status": holder.status if holder else None,
                },
            )
            # Reported failed, not succeeded: if this holder's (fenced) effect was refused and the
            # newer holder then failed, deleting the message would leave nothing to retry the
            # key. The redelivery costs one call and comes back as a duplicate at worst.
            return RecordResult(
                ctx.message_id,
                Outcome.LEASE_LOST,
                True,
                key=ctx.key,
                fence=ctx.fence,
                takeover=takeover,
            )
        return RecordResult(
            ctx.message_id,
            Outcome.PROCESSED,
            False,
            key=ctx.key,
            fence=ctx.fence,
            takeover=takeover,
        )

    def _fail(self, ctx: RecordContext, error: ErrorInfo) -> str | None:
        """Keep the failure on the record. Returns its replay nonce ("" when retryable); None
        when the lease was lost or the write failed."""
        assert ctx._lock is not None
        try:
            written = self.store.fail(ctx._lock, error)
        except Exception:
            observability.logger().exception(
                "could not record the failure", extra={"message_id": ctx.message_id}
            )
            return None
        return (written.replay_nonce or "") if written.ok else None

    def _in_progress(
        self, record: dict[str, Any], mid: str, key: str, holder: StoredRecord | None
    ) -> RecordResult:
        """Hide the message until the holder's lease ends, so retries don't burn receives."""
        lease_end = holder.lease_expires_at_ms if holder else None
        if lease_end is not None and record.get("receiptHandle") and record.get("eventSourceARN"):
            seconds = math.ceil((lease_end - time.time() * 1000) / 1000) + 1
            try:
                self.sqs.change_message_visibility(
                    QueueUrl=queue_url_from_arn(
                        record["eventSourceARN"], self.sqs.meta.endpoint_url
                    ),
                    ReceiptHandle=record["receiptHandle"],
                    VisibilityTimeout=max(1, min(seconds, MAX_VISIBILITY_S)),
                )
            except Exception as exc:  # best effort: the queue's own timeout still applies
                observability.logger().warning(
                    "could not defer an in-progress duplicate",
                    extra={"message_id": mid, "error": repr(exc)},
                )
        return RecordResult(mid, Outcome.IN_PROGRESS, True, key=key, reason="lease held elsewhere")

    def _dead_letter(
        self,
        record: dict[str, Any],
        mid: str,
        key: str | None,
        error: ErrorInfo,
        attempt: int,
        *,
        takeover: bool = False,
        nonce: str | None = None,
    ) -> RecordResult:
        reason = f"{error.type}: {error.message}"
        url = self.config.dead_letter_queue_url
        if not url:
            observability.logger().error(
                "permanent failure but no DEAD_LETTER_QUEUE_URL: reporting it failed instead",
                extra={"message_id": mid, "key": key, "reason": reason},
            )
            return RecordResult(mid, Outcome.ERROR, True, key=key, reason=reason)
        try:
            send_to_dead_letter_queue(
                self.sqs, url, record, error, self.config.scope, attempt, replay_nonce=nonce or None
            )
        except Exception as exc:
            observability.logger().error(
                "DLQ send failed: reporting the record failed so it is not lost",
                extra={"message_id": mid, "key": key, "reason": reason, "error": repr(exc)},
            )
            return RecordResult(mid, Outcome.ERROR, True, key=key, reason=f"DLQ send: {exc!r}")
        observability.logger().warning(
            "sent to the DLQ", extra={"message_id": mid, "key": key, "reason": reason}
        )
        return RecordResult(
            mid,
            Outcome.PERMANENT,
            False,
            key=key,
            reason=reason,
            dead_lettered=True,
            takeover=takeover,
        )

    def _infrastructure_error(self, mid: str, key: str, step: str, exc: Exception) -> RecordResult:
        observability.logger().error(
            f"{step} failed; the record will be retried",
            extra={"message_id": mid, "key": key, "error": repr(exc)},
        )
        return RecordResult(mid, Outcome.ERROR, True, key=key, reason=f"{step}: {exc!r}")


def remaining_ms(context: Any) -> float:
    if context is not None and hasattr(context, "get_remaining_time_in_millis"):
        return float(context.get_remaining_time_in_millis())
    return math.inf


def _owner(context: Any) -> str:
    function = getattr(context, "function_name", None) or "local"
    request = getattr(context, "aws_request_id", None) or "-"
    return f"{function}:{request}"


def _attempts(record: StoredRecord | None) -> int:
    return record.attempts if record else 0
