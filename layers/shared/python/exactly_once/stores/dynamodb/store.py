"""The fenced idempotency store: one DynamoDB record per (scope, key).

Every write after `acquire` is conditioned on the lock token and IN_PROGRESS, so an invocation
whose lease expired and was taken over (a zombie) can neither overwrite nor delete the new
holder's record. Failures are kept as FAILED records for people, not deleted.

This module is the store's face: its settings, its client, and what each operation asks for.
The requests live beside it, one job each: `request` builds an acquire's conditional writes,
`acquisition` sends them and reads a refusal, `fenced_writes` is the holder's conditioned write,
`reads` reads records back, and `expressions` is the vocabulary they all share.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from exactly_once import clients, lifecycle
from exactly_once.errors import ConfigurationError
from exactly_once.stores import schema
from exactly_once.stores.dynamodb import acquisition, batched, clock_skew, reads
from exactly_once.stores.dynamodb.expressions import MARK_FAILED, failure_values, n, names, s
from exactly_once.stores.dynamodb.fenced_writes import completion, fenced_update, item_too_large
from exactly_once.stores.dynamodb.request import Request
from exactly_once.stores.lifetimes import DAY_S, check_limits, overdue, record_ttl
from exactly_once.stores.records import (
    AcquireRequest,
    Acquisition,
    ErrorInfo,
    Finish,
    Lock,
    StepPoint,
    StoredRecord,
    WriteResult,
)
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import StoredResult

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from exactly_once.config import StoreSettings


class IdempotencyStore:
    """Lock, complete and fail idempotency records with conditional writes.

    `clock` returns epoch seconds; conditions compare against the caller's clock (DynamoDB
    cannot read server time), which is why leases carry a margin. The process's skew from
    DynamoDB's clock is measured from the responses' Date header (clock_skew.py): while it is
    ahead by more than `max_skew_ms` (the lease margin), expired leases are not taken over.
    """

    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient | None = None,
        record_ttl_s: int = 15 * DAY_S,
        failed_ttl_s: int = 30 * DAY_S,
        result_cap_bytes: int = 64 * 1024,
        clock: Callable[[], float] = time.time,
        max_skew_ms: int = 5_000,
    ) -> None:
        check_limits(record_ttl_s, failed_ttl_s, result_cap_bytes)
        self.table_name = table_name
        self._client = client
        self._client_generation: int | None = None  # set when the store fetched its own
        self.record_ttl_s = record_ttl_s
        self.failed_ttl_s = failed_ttl_s
        self.result_cap_bytes = result_cap_bytes
        self._clock = clock
        self.max_skew_ms = max_skew_ms
        self._skew_hooked: Any = None  # the client clock_skew measures on

    backend = "dynamodb"

    @property
    def name(self) -> str:
        return self.table_name

    @classmethod
    def configured(
        cls, settings: StoreSettings, client: DynamoDBClient | None = None
    ) -> IdempotencyStore:
        """The store an entry point's configuration describes."""
        if not settings.table_name:
            raise ConfigurationError("no DynamoDB table is configured (IDEMPOTENCY_TABLE)")
        return cls(
            settings.table_name,
            client=client,
            record_ttl_s=settings.record_ttl_s,
            failed_ttl_s=settings.failed_ttl_s,
            result_cap_bytes=settings.result_cap_bytes,
            max_skew_ms=getattr(getattr(settings, "lease", None), "margin_ms", 5_000),
        )

    @property
    def client(self) -> DynamoDBClient:
        # A client this store fetched itself is fetched again in a clone (fork, SnapStart
        # restore): the shared one's sockets belong to the parent. A given client is kept.
        if self._client is None or self._client_generation not in (None, lifecycle.generation()):
            self._client = clients.dynamodb()
            self._client_generation = lifecycle.generation()
        if self._skew_hooked is not self._client:  # every reply's Date then measures the skew
            clock_skew.install(self._client)
            self._skew_hooked = self._client
        return self._client

    def _ttl(self, now_s: int, lease_until_ms: int | None = None) -> int:
        return record_ttl(now_s, self.record_ttl_s, lease_until_ms)

    # -- acquisition -------------------------------------------------------------------------

    def acquire(
        self,
        scope: str,
        key: str,
        *,
        lease_ms: int,
        owner: str,
        fingerprint: str | None = None,
        block_takeover: bool = False,
        replay_nonce: str | None = None,
        expected_duration_ms: int | None = None,
        resume_id: str | None = None,
    ) -> Acquisition:
        """Take the record with ONE UpdateItem; on refusal the old item comes back in the error.

        Acquirable while live: absent, IN_PROGRESS with an expired lease (unless
        `block_takeover`), FAILED and retryable, or FAILED permanently when `replay_nonce` is
        that failure's own nonce (only a real DLQ replay carries it). A different fingerprint
        is never acquirable. A TTL-expired record counts as absent: it is replaced whole by a
        new generation in one conditional PutItem (acquisition.py), never patched in two steps.

        The fence is `if_not_exists(fence, floor) + 1` with the caller's epoch milliseconds as
        the floor, so it keeps increasing even after the TTL sweep deleted the item: a record
        takes at most 1000 writes a second (DynamoDB's per-item limit), so its fence never
        outruns the clock, and the TTL (>= 60 s) outlasts any clock skew.

        `expected_duration_ms` records when the holder expects to be done (`expected_by`), for
        a monitor of slow work. Without it the request is what it always was (but for removing
        `resume_id`, which no earlier record has): the queue path's measured behaviour (chaos
        runs, the model test) rests on that request.

        `resume_id` names a holder that outlives one invocation (a durable execution): an
        IN_PROGRESS record carrying the same id is its own lock from an earlier invocation, and
        is resumed, live lease or not, with a new token and fence (`Acquisition.resumed`), so
        that invocation, if it still runs, is fenced out. Any other acquire clears the id.
        """
        rid = schema.record_id(scope, key)
        now_ms = int(self._clock() * 1000)
        lease_until = now_ms + lease_ms
        req = Request(
            record_id=rid,
            scope=scope,
            token=secrets.token_hex(16),
            owner=owner,
            fingerprint=fingerprint,
            block_takeover=block_takeover,
            now_ms=now_ms,
            lease_until_ms=lease_until,
            ttl_s=self._ttl(now_ms // 1000, lease_until),
            expected_by_ms=None if expected_duration_ms is None else now_ms + expected_duration_ms,
            resume_id=resume_id or None,
            skewed=clock_skew.too_far_ahead(self.max_skew_ms),
        )
        return acquisition.take(self, req, replay_nonce)

    def acquire_many(self, requests: Sequence[AcquireRequest]) -> list[Acquisition | Exception]:
        """A batch's keys in one BatchExecuteStatement (a second only for wrong `likely_taken`
        hints), each answered as `acquire` would; what the batch cannot answer for a key falls
        back to `acquire`'s own call with the same token (batched.py)."""
        now_ms = int(self._clock() * 1000)
        skewed = clock_skew.too_far_ahead(self.max_skew_ms)
        keys = [batched.request_for(ask, now_ms, self._ttl, skewed) for ask in requests]
        return batched.acquire_many(self, keys)

    # -- fenced writes -----------------------------------------------------------------------

    def finish_many(self, finishes: Sequence[Finish]) -> list[WriteResult | Exception]:
        """A batch's outcomes in one BatchExecuteStatement of fenced UPDATEs, each answered as
        `complete` or `fail` would; a key the batch cannot answer gets that call (batched.py)."""
        now = self._clock()
        return batched.finish_many(self, finishes, now, self._ttl(int(now)))

    def complete(self, lock: Lock, result: Any = None) -> WriteResult:
        """Store the result and mark COMPLETED; never creates a record.

        The result is kept as stored_result.StoredResult says (a digest over the cap).
        """
        now = self._clock()
        now_ms = int(now * 1000)
        ttl_s = self._ttl(int(now))
        kept = StoredResult.of(result, self.result_cap_bytes)
        update, values = completion(kept, now_ms, ttl_s)
        try:
            return fenced_update(self, lock, update, values, leaves=Status.COMPLETED)
        except self.client.exceptions.ClientError as error:
            if kept.text is None or not item_too_large(error):
                raise
        # The record's steps (steps/) left no room for the result beside them: it is kept as
        # its digest and size, as an over-cap result is, so the work is still recorded done.
        update, values = completion(
            kept.without_text("the record's steps leave no room"), now_ms, ttl_s
        )
        return fenced_update(self, lock, update, values, leaves=Status.COMPLETED)

    def fail(self, lock: Lock, error: ErrorInfo) -> WriteResult:
        """Keep the record as FAILED with the error, for the next delivery or for a person.

        A permanent failure gets a fresh random nonce: the dead-lettered message carries it, and
        only a delivery presenting it (a real replay) may run the key again.
        """
        values = failure_values(lock.record_id, error, self._clock(), self.failed_ttl_s)
        if error.retryable:
            return fenced_update(self, lock, f"{MARK_FAILED} REMOVE #nonce", values, Status.FAILED)
        values[":nonce"] = s(secrets.token_hex(16))
        return fenced_update(self, lock, f"{MARK_FAILED}, #nonce = :nonce", values, Status.FAILED)

    def release(self, lock: Lock, reason: str = "released by its holder") -> WriteResult:
        """Give the record up without an error of the work's own.

        It becomes a retryable FAILED record rather than being deleted: deleting would reset
        the fence, and a zombie from before could then meet its own fence number again.
        """
        return self.fail(lock, ErrorInfo("Released", reason, retryable=True))

    def extend(self, lock: Lock, lease_ms: int) -> WriteResult:
        """Renew the lease for work that outlives it; the TTL moves with it. New lock returned."""
        now_ms = int(self._clock() * 1000)
        lease_until = now_ms + lease_ms
        result = fenced_update(
            self,
            lock,
            "SET #lease = :lease, #pa = :lease, #upd = :now_ms, #exp = :ttl",
            {
                ":lease": n(lease_until),
                ":now_ms": n(now_ms),
                ":ttl": n(self._ttl(now_ms // 1000, lease_until)),
            },
            leaves=Status.IN_PROGRESS,
        )
        if result.ok:
            return replace(result, lock=replace(lock, lease_expires_at_ms=lease_until))
        return result

    def transaction(self, lock: Lock) -> Any:
        """DynamoDB has no transaction a business function could share with the record: its
        effects are fenced instead (effects.put_once, ledger.record_effect)."""
        raise ConfigurationError(
            "ctx.transaction needs the PostgreSQL store (IDEMPOTENCY_DSN); on DynamoDB use a "
            "fenced effect (exactly_once.effects.put_once)"
        )

    def discard(self, lock: Lock) -> None:
        """Nothing to roll back: every write here is its own conditional write."""

    # -- steps (steps/) ------------------------------------------------------------------------

    def record_step(
        self, lock: Lock, point: StepPoint, writes: Sequence[dict[str, Any]] = ()
    ) -> WriteResult:
        """Write a step's recovery point, fenced, with the step's `writes` (TransactWriteItems
        entries) in the same transaction (stores/dynamodb/steps.py)."""
        from exactly_once.stores.dynamodb import steps

        at_ms = int(self._clock() * 1000)
        return steps.record_step(self, lock, replace(point, at_ms=at_ms), writes)

    def step_transaction(self, lock: Lock) -> Any:
        """A step's writes on DynamoDB are `writes` committed with its recovery point."""
        raise ConfigurationError(
            "a step's transaction needs the PostgreSQL store (IDEMPOTENCY_DSN); on DynamoDB "
            "give the step its writes (step.write(...) or step.put(...)), committed with its "
            "recovery point"
        )

    def discard_step(self, lock: Lock) -> None:
        """Nothing to roll back: a step's writes go in its one TransactWriteItems."""

    # -- reads and operator actions ----------------------------------------------------------

    def get(self, scope: str, key: str) -> StoredRecord | None:
        """The live record, or None when absent or TTL-expired (TTL deletion lags)."""
        return self.get_by_id(schema.record_id(scope, key))

    def get_by_id(self, record_id: str) -> StoredRecord | None:
        return reads.by_id(self, record_id, self._clock)

    def list_pending(
        self, status: Status, *, stuck_only: bool = False, limit: int | None = None
    ) -> Iterator[StoredRecord]:
        """IN_PROGRESS or FAILED records from the sparse index, without a Scan.

        `stuck_only` keeps IN_PROGRESS records whose lease has expired. The index is
        eventually consistent, so a record may show up briefly after it moved on.
        """
        yield from reads.pending(self, self._clock, status, stuck_only, limit)

    def list_overdue(self, *, limit: int | None = None) -> Iterator[StoredRecord]:
        """IN_PROGRESS records past the completion their holder expected (`expected_by`)."""
        return overdue(self.list_pending, int(self._clock() * 1000), limit)

    def reset(self, scope: str, key: str) -> bool:
        """Make a FAILED record retryable again so the next delivery or a replay runs it."""
        now_ms = int(self._clock() * 1000)
        update = "SET #err.#retry = :true, #upd = :now_ms"
        condition = "#st = :failed"
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={schema.PARTITION_KEY: s(schema.record_id(scope, key))},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names(update + condition),
                ExpressionAttributeValues={
                    ":true": {"BOOL": True},
                    ":now_ms": n(now_ms),
                    ":failed": s(Status.FAILED),
                },
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True
