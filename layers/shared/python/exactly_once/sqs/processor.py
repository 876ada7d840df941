"""One SQS record through the idempotency state machine.

Every path ends in a RecordResult: succeeded, reported as failed (SQS redelivers it), or sent
to the DLQ with its reason. Nothing here raises to the batch. What the record is (its body,
key and fingerprint) is read by identity.py; the state machine it runs on is claims.py's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from exactly_once import observability
from exactly_once.claims import Claim, ClaimStatus, claim
from exactly_once.effects import LeaseLost
from exactly_once.errors import CommitFailed, PermanentError
from exactly_once.held_lock import OnceLock
from exactly_once.lease import owner, remaining_ms
from exactly_once.outcomes import Outcome, RecordResult
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.context import RecordContext
from exactly_once.sqs.gathering import Gathering
from exactly_once.sqs.holder_wait import holder_gone
from exactly_once.sqs.identity import identify
from exactly_once.sqs.keys import KeySpec
from exactly_once.sqs.messages import SqsMessage
from exactly_once.sqs.reports import Reports
from exactly_once.stores.protocol import Store
from exactly_once.stores.records import AcquireRequest, ErrorInfo, StoredRecord, WriteResult

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

Handler = Callable[[Any, RecordContext], Any]


class RecordProcessor(Reports):
    def __init__(
        self,
        handler: Handler,
        key: KeySpec,
        config: ConsumerConfig,
        store: Store,
        sqs: SQSClient | None = None,
        context_type: type[RecordContext] = RecordContext,
    ) -> None:
        self.handler = handler
        self.context_type = context_type  # what the handler's ctx is (NotificationContext)
        self.key = key
        self.config = config
        self.store = store
        self._sqs = sqs
        self._sqs_generation: int | None = None  # set when fetched here, not given

    def process(
        self,
        message: SqsMessage,
        context: Any,
        margin_ms: float = 0.0,
        claimed: Claim | Exception | None = None,
        gather: Gathering | None = None,
    ) -> RecordResult:
        """`margin_ms`: a record is not started with less time than this left. `claimed`: the
        key's claim (or the error taking it) made for the whole batch (waves.py); None claims
        it here. `gather`: a completion goes there, to be written with the batch's others."""
        mid = message.message_id
        try:
            return self._process(message, context, margin_ms, claimed, gather)
        except BaseException as exc:  # the last line of defence: report, never raise to the batch
            if isinstance(exc, KeyboardInterrupt):
                raise
            observability.logger().exception(
                "record failed unexpectedly", extra={"message_id": mid}
            )
            return RecordResult(mid, Outcome.ERROR, True, reason=f"{type(exc).__name__}: {exc}")

    def key_of(self, message: SqsMessage) -> str | None:
        """The record's idempotency key, or None when it has none (it then runs on its own)."""
        try:
            return self._identity(message)[1]
        except BaseException as exc:  # a key function's CancelledError must not fail the batch
            if isinstance(exc, KeyboardInterrupt):
                raise
            return None

    def _identity(self, message: SqsMessage) -> tuple[Any, str, str | None]:
        """`identify` once per message (the outcome or the failure): the batch asks for the key
        to order chains, then the record's run asks again."""
        memo = ("identity", id(self))  # another processor's settings may read it differently
        found = message.derived.get(memo)
        if found is None:
            try:
                found = identify(message, self.key, self.config)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                found = exc
            message.derived[memo] = found
        if isinstance(found, BaseException):
            raise found
        return found

    def deferred(self, message: SqsMessage, reason: str) -> RecordResult:
        return RecordResult(message.message_id, Outcome.DEFERRED, True, reason=reason)

    def acquire_request(self, message: SqsMessage, context: Any) -> AcquireRequest | None:
        """What the batch asks the store for this record's key, or None when it takes no key
        (no messageId, or a body or key that fails it: `process` reports those). The key is
        likely taken when the message was received before or is a replay."""
        if not message.message_id:
            return None
        try:
            _, key, fp = self._identity(message)
        except BaseException as exc:  # as `key_of`: reported when the record runs
            if isinstance(exc, KeyboardInterrupt):
                raise
            return None
        return self._request(message, key, fp, context)

    def _request(
        self, message: SqsMessage, key: str, fp: str | None, context: Any
    ) -> AcquireRequest:
        return AcquireRequest(
            self.config.scope,
            key,
            lease_ms=self.config.lease.lease_ms(context),
            owner=owner(context),
            fingerprint=fp,
            block_takeover=self.config.block_takeover,
            replay_nonce=message.replay_nonce,
            likely_taken=(message.receive_count or 1) > 1 or message.replay_nonce is not None,
        )

    def _claim(self, request: AcquireRequest, context: Any, margin_ms: float) -> Claim:
        """The key claimed alone, as the batch claims it (`acquire_request`)."""
        return claim(
            self.store,
            request.scope,
            request.key,
            lease_ms=request.lease_ms,
            owner=request.owner,
            fingerprint=request.fingerprint,
            block_takeover=request.block_takeover,
            replay_nonce=request.replay_nonce,
            lambda_context=context,
            reserve_ms=margin_ms / 2,  # completion may eat into the margin, not past half
            heartbeat_ms=self.config.lease.heartbeat_ms,  # a dead holder frees the key soon
        )

    def _after_holder(
        self, message: SqsMessage, held: Claim, fp: str | None, context: Any, margin_ms: float
    ) -> Claim:
        """The key claimed again once its holder is gone (holder_wait.py), or `held` as it was
        when the holder lives on or would outlast the invocation."""
        left = remaining_ms(context)
        if math.isinf(left):  # no Lambda context: the time the lease policy assumes
            left = self.config.lease.default_ms
        key = held.key
        if not holder_gone(self.store, self.config.scope, key, held.record, left - margin_ms):
            return held
        return self._claim(self._request(message, key, fp, context), context, margin_ms)

    def _process(
        self,
        message: SqsMessage,
        context: Any,
        margin_ms: float,
        claimed: Claim | Exception | None,
        gather: Gathering | None,
    ) -> RecordResult:
        mid = message.message_id
        if not mid:  # no string messageId, or not a record at all
            return RecordResult(mid, Outcome.ERROR, True, reason="malformed record: no messageId")
        if remaining_ms(context) < margin_ms:
            if isinstance(claimed, Claim) and claimed.acquired and gather is not None:
                gather.release(claimed.lock, "too close to the invocation deadline")
            return self.deferred(message, "too close to the invocation deadline")
        try:
            body, key, fp = self._identity(message)
        except PermanentError as exc:  # NonJsonBody, MissingKey...: no key, so no record to keep
            return self._dead_letter(
                message, None, ErrorInfo.from_exception(exc, retryable=False), 0
            )
        try:
            if claimed is None:
                claimed = self._claim(self._request(message, key, fp, context), context, margin_ms)
            elif isinstance(claimed, Exception):
                raise claimed
        except Exception as exc:  # throttled past botocore's retries, or DynamoDB unavailable
            return self._infrastructure_error(mid, key, "acquire", exc)

        if claimed.status is ClaimStatus.IN_PROGRESS and message.in_order:
            try:  # a stream record waits for its key's holder, then asks again
                claimed = self._after_holder(message, claimed, fp, context, margin_ms)
            except Exception as exc:
                return self._infrastructure_error(mid, key, "acquire", exc)
        status, stored = claimed.status, claimed.record
        if status is ClaimStatus.COMPLETED:
            return RecordResult(mid, Outcome.DUPLICATE, False, key=key)
        if status is ClaimStatus.IN_PROGRESS:
            return self._in_progress(message, key, stored)
        if status is ClaimStatus.MISMATCH:
            error = ErrorInfo(
                "FingerprintMismatch",
                f"key {key!r} was already used for a different payload",
                retryable=False,
            )
            return self._dead_letter(message, key, error, _attempts(stored))
        if status is ClaimStatus.FAILED:
            error = claimed.error or ErrorInfo("Failed", "", False)
            nonce = stored.replay_nonce if stored else None
            return self._dead_letter(message, key, error, _attempts(stored), nonce=nonce)

        lock = claimed.lock
        ctx = self.context_type(
            mid,
            key,
            lock.fence,
            lock.attempt,
            message.record,
            context,
            self.store,
            lock.store_lock,
            message,
        )
        return self._run(ctx, lock, body, claimed.takeover, gather)

    def _run(
        self,
        ctx: RecordContext,
        lock: OnceLock,
        body: Any,
        takeover: bool,
        gather: Gathering | None,
    ) -> RecordResult:
        try:
            return self._run_locked(ctx, lock, body, takeover, gather)
        finally:
            lock.abandon()  # a transaction still open here has no outcome to commit with

    def _run_locked(
        self,
        ctx: RecordContext,
        lock: OnceLock,
        body: Any,
        takeover: bool,
        gather: Gathering | None,
    ) -> RecordResult:
        mid, key = ctx.message_id, ctx.key
        try:
            result = self.handler(body, ctx)
        except LeaseLost as exc:  # a fenced effect was refused: a newer holder owns the record
            observability.logger().warning(
                "effect refused: lease lost", extra={"message_id": mid, "key": key}
            )
            return RecordResult(mid, Outcome.LEASE_LOST, True, key=key, reason=str(exc))
        except PermanentError as exc:
            error = ErrorInfo.from_exception(exc, retryable=False)
            failed = self._fail(ctx, lock, error)
            if failed is None:
                return RecordResult(mid, Outcome.LEASE_LOST, True, key=key, reason=str(exc))
            return self._dead_letter(
                ctx.message, key, error, lock.attempt, takeover=takeover, nonce=failed
            )
        except BaseException as exc:  # CancelledError, a library's SystemExit: this record only
            error = ErrorInfo.from_exception(exc, retryable=True)
            if self._gives_up(lock.attempt) and not isinstance(exc, KeyboardInterrupt):
                return self._give_up(ctx, lock, error, takeover)
            self._fail(ctx, lock, error)
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
        return self._complete(ctx, lock, result, takeover, gather)

    def _gives_up(self, attempt: int) -> bool:
        limit = self.config.max_attempts
        return limit is not None and attempt >= limit

    def _give_up(
        self, ctx: RecordContext, lock: OnceLock, error: ErrorInfo, takeover: bool
    ) -> RecordResult:
        """The last attempt allowed failed: FAILED for good, and the record to the DLQ with its
        reason, as a permanent failure goes (a stream's shard would otherwise stop at it until
        the mapping's retry limit or record age drops it, without its data)."""
        final = ErrorInfo(
            error.type, f"gave up after {lock.attempt} attempts: {error.message}", retryable=False
        )
        failed = self._fail(ctx, lock, final)
        if failed is None:
            return RecordResult(
                ctx.message_id, Outcome.LEASE_LOST, True, key=ctx.key, reason=final.message
            )
        return self._dead_letter(
            ctx.message, ctx.key, final, lock.attempt, takeover=takeover, nonce=failed
        )

    def _complete(
        self,
        ctx: RecordContext,
        lock: OnceLock,
        result: Any,
        takeover: bool,
        gather: Gathering | None,
    ) -> RecordResult:
        """COMPLETED now, or gathered to be written with the batch's other completions: its
        result is this record's until the batch's write answers (`Gathering.write`)."""
        # An ordered record (FIFO, a stream) whose renewal was refused completes now: its
        # LeaseLost must stop its group before the group's next message runs.
        if (
            gather is None
            or (ctx.message.ordered and lock.heartbeat_lost)
            or self._lapses_in_the_batch(lock, ctx.lambda_context)
        ):
            return self._settled(ctx, lock, takeover, lambda: lock.succeed(result))
        finish = lock.gathered(result)
        if finish is None:  # a lent transaction commits with its own completion
            return self._settled(ctx, lock, takeover, lambda: lock.succeed(result))

        def settle(answer: WriteResult | Exception) -> RecordResult:
            return self._settled(ctx, lock, takeover, lambda: lock.settle(finish, answer))

        gather.add(id(ctx.message), lock, finish, settle)
        return self._processed(ctx, takeover)

    def _lapses_in_the_batch(self, lock: OnceLock, context: Any) -> bool:
        """The lock may lapse before the invocation ends (a lease capped below it: LeasePolicy
        `max_ms` or `override_ms`): its completion must not wait for the wave's slowest
        record, or a duplicate delivery could take the key over and run the work again."""
        if lock.held_until is None:
            return False
        left = remaining_ms(context)
        if math.isinf(left):  # no Lambda context: the time the lease policy assumes
            left = self.config.lease.default_ms
        return lock.held_until < time.monotonic() + left / 1000

    def _processed(self, ctx: RecordContext, takeover: bool) -> RecordResult:
        return RecordResult(
            ctx.message_id,
            Outcome.PROCESSED,
            False,
            key=ctx.key,
            fence=ctx.fence,
            takeover=takeover,
        )

    def _settled(
        self, ctx: RecordContext, lock: OnceLock, takeover: bool, write: Callable[[], None]
    ) -> RecordResult:
        """The record's result once its completion `write` answered (or raised)."""
        try:
            write()
        except LeaseLost as lost:
            observability.logger().error(
                "LEASE LOST at completion: the work ran, but another holder owns the record now",
                extra={
                    "message_id": ctx.message_id,
                    "key": ctx.key,
                    "fence": ctx.fence,
                    "holder": str(lost),
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
        except CommitFailed as exc:  # ctx.transaction's writes rolled back with it
            self._fail(ctx, lock, ErrorInfo.from_exception(exc, retryable=True))
            return RecordResult(
                ctx.message_id,
                Outcome.FAILED,
                True,
                key=ctx.key,
                reason=f"complete: {exc}",
                fence=ctx.fence,
                takeover=takeover,
            )
        except Exception as exc:
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
        return self._processed(ctx, takeover)

    def _fail(self, ctx: RecordContext, lock: OnceLock, error: ErrorInfo) -> str | None:
        """Keep the failure on the record. Returns its replay nonce ("" when retryable); None
        when the lease was lost or the write failed."""
        try:
            return lock.fail(error)
        except LeaseLost:
            return None
        except Exception:
            observability.logger().exception(
                "could not record the failure", extra={"message_id": ctx.message_id}
            )
            return None


def _attempts(record: StoredRecord | None) -> int:
    return record.attempts if record else 0
