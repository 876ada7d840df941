"""The fenced idempotency store: one DynamoDB record per (scope, key).

Every write after `acquire` is conditioned on the lock token and IN_PROGRESS, so an invocation
whose lease expired and was taken over (a zombie) can neither overwrite nor delete the new
holder's record. Failures are kept as FAILED records for people, not deleted.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from exactly_once import clients, lifecycle
from exactly_once.errors import ConfigurationError
from exactly_once.stores import schema
from exactly_once.stores.dynamodb import clock_skew
from exactly_once.stores.lifetimes import DAY_S, check_limits, overdue, record_ttl
from exactly_once.stores.records import (
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Item,
    Lock,
    StoredRecord,
    WriteResult,
    WriteStatus,
)
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import StoredResult

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from exactly_once.config import StoreSettings

RENEWALS = 3  # a TTL-expired record raced by other renewers: give up (reported, retried) after this

# Every attribute goes through a placeholder: several of them (status, owner, result, error)
# are DynamoDB reserved words, and one rule for all is easier to get right.
_NAMES = {
    "#id": schema.PARTITION_KEY,
    "#st": schema.STATUS,
    "#exp": schema.TTL,
    "#lease": schema.LEASE_EXPIRES_AT,
    "#tok": schema.LOCK_TOKEN,
    "#fence": schema.FENCE,
    "#att": schema.ATTEMPTS,
    "#own": schema.OWNER,
    "#crt": schema.CREATED_AT,
    "#upd": schema.UPDATED_AT,
    "#res": schema.RESULT,
    "#rsha": schema.RESULT_SHA256,
    "#rsize": schema.RESULT_SIZE,
    "#romit": schema.RESULT_OMITTED,
    "#err": schema.ERROR,
    "#fp": schema.FINGERPRINT,
    "#ps": schema.PENDING_SHARD,
    "#pa": schema.PENDING_AT,
    "#retry": "retryable",
    "#nonce": schema.REPLAY_NONCE,
    "#xby": schema.EXPECTED_BY,
    "#rid": schema.RESUME_ID,
}

_HOLDS_LOCK = "#tok = :tok AND #st = :ip"
_MARK_FAILED = (
    "SET #st = :failed, #err = :err, #upd = :now_ms, #exp = :ttl, #ps = :shard, #pa = :now_ms"
)


def _names(expression: str) -> dict[str, str]:
    """Only the placeholders an expression uses: DynamoDB rejects unused ones."""
    return {k: v for k, v in _NAMES.items() if k in expression}


def _returned_item(refused: Exception) -> Item | None:
    """The old item that ReturnValuesOnConditionCheckFailure=ALL_OLD puts in the error."""
    item = getattr(refused, "response", {}).get("Item")
    return dict(item) if item else None


def _resumed(old: Item, req: _Request) -> bool:
    """The acquire resumed this holder's own IN_PROGRESS lock (the same `resume_id`)."""
    return (
        req.resume_id is not None
        and old.get(schema.STATUS, {}).get("S") == Status.IN_PROGRESS
        and old.get(schema.RESUME_ID, {}).get("S") == req.resume_id
    )


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


@dataclass(frozen=True)
class _Request:
    """One call to `acquire`: what it asks for, and the clock reading it decides by."""

    record_id: str
    scope: str
    token: str
    owner: str
    fingerprint: str | None
    block_takeover: bool
    now_ms: int
    lease_until_ms: int
    ttl_s: int
    expected_by_ms: int | None = None
    resume_id: str | None = None
    skewed: bool = False  # this clock is too far ahead to judge leases (clock_skew.py)

    @property
    def now_s(self) -> int:
        return self.now_ms // 1000

    def lock(self, fence: int, attempt: int) -> Lock:
        return Lock(self.record_id, self.token, fence, attempt, self.lease_until_ms, self.scope)


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
        new generation in one conditional PutItem (`_renew`), never patched in two steps.

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
        req = _Request(
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
        sets = [
            "#st = :ip",
            "#tok = :tok",
            "#lease = :lease",
            "#own = :own",
            "#upd = :now_ms",
            "#crt = if_not_exists(#crt, :now_ms)",
            "#exp = :ttl",
            "#ps = :shard",
            "#pa = :lease",
            "#fence = if_not_exists(#fence, :now_ms) + :one",
        ]
        values: dict[str, Any] = {
            ":ip": _s(Status.IN_PROGRESS),
            ":tok": _s(req.token),
            ":lease": _n(lease_until),
            ":own": _s(owner),
            ":now_ms": _n(now_ms),
            ":now_s": _n(req.now_s),
            ":ttl": _n(req.ttl_s),
            ":shard": _s(schema.pending_shard(rid, Status.IN_PROGRESS)),
            ":one": _n(1),
            ":failed": _s(Status.FAILED),
            ":true": {"BOOL": True},
        }
        if fingerprint is not None:
            sets.append("#fp = :fp")
            values[":fp"] = _s(fingerprint)
        if req.expected_by_ms is not None:
            sets.append("#xby = :xby")
            values[":xby"] = _n(req.expected_by_ms)
        removed = "#res, #rsha, #rsize, #romit, #err, #nonce"
        if req.resume_id is not None:
            sets.append("#rid = :rid")
            values[":rid"] = _s(req.resume_id)
        else:
            removed += ", #rid"  # a holder that took the lock over must never be resumed
        update = f"SET {', '.join(sets)} ADD #att :one REMOVE {removed}"

        # AND binds tighter than OR, and DynamoDB rejects redundant parentheses, so the live
        # and fingerprint checks are repeated in each clause instead of wrapping them all.
        takeover = not (block_takeover or req.skewed)
        reacquirable = ["#st = :ip AND #lease < :now_ms"] if takeover else []
        reacquirable.append("#st = :failed AND #err.#retry = :true")
        if replay_nonce:
            reacquirable.append("#st = :failed AND #nonce = :nonce")
            values[":nonce"] = _s(replay_nonce)
        if req.resume_id is not None:
            reacquirable.append("#st = :ip AND #rid = :rid")
        live = "#exp >= :now_s AND "
        same_payload = "(attribute_not_exists(#fp) OR #fp = :fp) AND " if fingerprint else ""
        condition = " OR ".join(
            ["attribute_not_exists(#id)"] + [live + same_payload + c for c in reacquirable]
        )

        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key={schema.PARTITION_KEY: _s(rid)},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=_names(update + condition),
                ExpressionAttributeValues=values,
                ReturnValues="UPDATED_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as refused:
            return self._refused(_returned_item(refused), req, RENEWALS)

        old: Item = dict(response.get("Attributes", {}))
        old_status = old.get(schema.STATUS, {}).get("S")
        old_fence = old.get(schema.FENCE)
        fence = int(old_fence["N"]) + 1 if old_fence else now_ms + 1
        attempt = int(old.get(schema.ATTEMPTS, {"N": "0"})["N"]) + 1
        return Acquisition(
            AcquireStatus.ACQUIRED,
            lock=req.lock(fence, attempt),
            takeover=old_status == Status.IN_PROGRESS,
            retry=old_status == Status.FAILED,
            resumed=_resumed(old, req),
        )

    def _refused(self, item: Item | None, req: _Request, renewals: int) -> Acquisition:
        """What a refused acquisition means, from the item DynamoDB returned with the refusal."""
        if item is None:  # cannot happen: a refused write on a missing item would have passed
            raise RuntimeError("conditional check failed without returning the item")
        record = StoredRecord.from_item(item)
        if record.lock_token == req.token:
            # Our own write committed and its reply was lost; botocore's retry met it.
            return Acquisition(AcquireStatus.ACQUIRED, lock=req.lock(record.fence, record.attempts))
        expired = record.is_expired(req.now_s) and not record.lease_live(req.now_ms)
        own = req.resume_id is not None and record.resume_id == req.resume_id
        if req.skewed and record.status is Status.IN_PROGRESS and not own:
            # Our clock runs too far ahead to tell an expired lease: neither take it over nor
            # block it; a process with a sound clock (or this one, later) decides.
            return Acquisition(AcquireStatus.IN_PROGRESS, record=record)
        if expired and req.block_takeover and record.status is Status.IN_PROGRESS and not own:
            return self._block(record, req)  # its holder may have paid: a person decides
        if expired:
            if renewals > 0:
                return self._renew(item, record, req, renewals - 1)
            return Acquisition(AcquireStatus.IN_PROGRESS, record=record)  # contended: retry later
        if req.fingerprint is not None and record.fingerprint not in (None, req.fingerprint):
            return Acquisition(AcquireStatus.FINGERPRINT_MISMATCH, record=record)
        if record.status is Status.COMPLETED:
            return Acquisition(AcquireStatus.ALREADY_COMPLETED, record=record)
        if record.status is Status.FAILED:
            return Acquisition(AcquireStatus.FAILED_PERMANENTLY, record=record)
        if req.block_takeover and record.lease_expired(req.now_ms):
            return self._block(record, req)
        return Acquisition(AcquireStatus.IN_PROGRESS, record=record)

    def _renew(self, item: Item, old: StoredRecord, req: _Request, renewals: int) -> Acquisition:
        """Replace a TTL-expired record with a new generation, in one conditional PutItem.

        One write, so no crash or throttle can leave half a generation behind: the old effect
        marks, attempts and result go with the old item. The condition holds only while the item
        is exactly as read (every write moves its token, status or update time) or gone. A
        zombie's effect mark written in between may be dropped: its effect item still refuses
        a second effect (effects.put_once).
        """
        fence = max(old.fence, req.now_ms) + 1
        new: Item = {
            schema.PARTITION_KEY: _s(req.record_id),
            schema.STATUS: _s(Status.IN_PROGRESS),
            schema.LOCK_TOKEN: _s(req.token),
            schema.LEASE_EXPIRES_AT: _n(req.lease_until_ms),
            schema.OWNER: _s(req.owner),
            schema.CREATED_AT: _n(req.now_ms),
            schema.UPDATED_AT: _n(req.now_ms),
            schema.TTL: _n(req.ttl_s),
            schema.PENDING_SHARD: _s(schema.pending_shard(req.record_id, Status.IN_PROGRESS)),
            schema.PENDING_AT: _n(req.lease_until_ms),
            schema.FENCE: _n(fence),
            schema.ATTEMPTS: _n(1),
        }
        if req.fingerprint is not None:
            new[schema.FINGERPRINT] = _s(req.fingerprint)
        if req.expected_by_ms is not None:
            new[schema.EXPECTED_BY] = _n(req.expected_by_ms)
        if req.resume_id is not None:
            new[schema.RESUME_ID] = _s(req.resume_id)
        # Gone since we read it (the TTL sweep): absent is as good. Else exactly as read. AND
        # binds tighter than OR, and DynamoDB rejects redundant parentheses.
        unchanged = ["#exp < :now_s"]
        values: dict[str, Any] = {":now_s": _n(req.now_s)}
        for placeholder, attribute in (
            ("#tok", schema.LOCK_TOKEN),
            ("#upd", schema.UPDATED_AT),
            ("#st", schema.STATUS),
        ):
            if attribute in item:
                unchanged.append(f"{placeholder} = :was_{attribute}")
                values[f":was_{attribute}"] = item[attribute]
            else:
                unchanged.append(f"attribute_not_exists({placeholder})")
        condition = "attribute_not_exists(#id) OR " + " AND ".join(unchanged)
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=new,
                ConditionExpression=condition,
                ExpressionAttributeNames=_names(condition),
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as refused:
            return self._refused(_returned_item(refused), req, renewals)
        return Acquisition(
            AcquireStatus.ACQUIRED, lock=req.lock(fence, 1), resumed=_resumed(item, req)
        )

    def _block(self, record: StoredRecord, req: _Request) -> Acquisition:
        """Mark an expired lease FAILED for a person instead of taking it over.

        For side effects that must never repeat (payments): the old holder may have done the
        work and died before completing, and only a person can tell.
        """
        error = ErrorInfo(
            "LeaseExpired",
            f"lease of {record.owner} (fence {record.fence}) expired before completion; "
            "takeover is blocked for this consumer, so a person must check and reset or replay",
            retryable=False,
        )
        # A fresh token, so the blocked holder's late fail or complete is "lease lost", never
        # mistaken for its own lost reply.
        update = f"{_MARK_FAILED}, #nonce = :nonce, #tok = :blocked"
        condition = f"{_HOLDS_LOCK} AND #lease < :now_ms"
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key={schema.PARTITION_KEY: _s(record.record_id)},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=_names(update + condition),
                ExpressionAttributeValues={
                    **self._failure_values(record.record_id, error, req.now_ms / 1000),
                    ":nonce": _s(secrets.token_hex(16)),
                    ":blocked": _s(secrets.token_hex(16)),
                    ":tok": _s(record.lock_token or ""),
                    ":ip": _s(Status.IN_PROGRESS),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as changed:
            # The old holder finished (or someone else moved it) in between: report that state.
            return self._refused(_returned_item(changed), replace(req, block_takeover=False), 0)
        return Acquisition(
            AcquireStatus.FAILED_PERMANENTLY,
            record=StoredRecord.from_item(dict(response["Attributes"])),
        )

    # -- fenced writes -----------------------------------------------------------------------

    def complete(self, lock: Lock, result: Any = None) -> WriteResult:
        """Store the result and mark COMPLETED; never creates a record.

        The result is kept as stored_result.StoredResult says (a digest over the cap).
        """
        now = self._clock()
        now_ms = int(now * 1000)
        values: dict[str, Any] = {
            ":done": _s(Status.COMPLETED),
            ":now_ms": _n(now_ms),
            ":ttl": _n(self._ttl(int(now))),
        }
        sets = ["#st = :done", "#upd = :now_ms", "#exp = :ttl"]
        kept = StoredResult.of(result, self.result_cap_bytes)
        for placeholder, value in (
            ("#res", None if kept.text is None else _s(kept.text)),
            ("#rsha", None if kept.sha256 is None else _s(kept.sha256)),
            ("#rsize", None if kept.size is None else _n(kept.size)),
            ("#romit", None if kept.omitted is None else _s(kept.omitted)),
        ):
            if value is not None:
                sets.append(f"{placeholder} = :{placeholder[1:]}")
                values[f":{placeholder[1:]}"] = value
        update = f"SET {', '.join(sets)} REMOVE #ps, #pa"
        return self._fenced_update(lock, update, values, leaves=Status.COMPLETED)

    def fail(self, lock: Lock, error: ErrorInfo) -> WriteResult:
        """Keep the record as FAILED with the error, for the next delivery or for a person.

        A permanent failure gets a fresh random nonce: the dead-lettered message carries it, and
        only a delivery presenting it (a real replay) may run the key again.
        """
        values = self._failure_values(lock.record_id, error, self._clock())
        if error.retryable:
            return self._fenced_update(lock, f"{_MARK_FAILED} REMOVE #nonce", values, Status.FAILED)
        values[":nonce"] = _s(secrets.token_hex(16))
        return self._fenced_update(lock, f"{_MARK_FAILED}, #nonce = :nonce", values, Status.FAILED)

    def _failure_values(self, record_id: str, error: ErrorInfo, now: float) -> dict[str, Any]:
        now_ms = int(now * 1000)
        return {
            ":failed": _s(Status.FAILED),
            ":err": error.to_attribute(now_ms),
            ":now_ms": _n(now_ms),
            ":ttl": _n(int(now) + self.failed_ttl_s),
            ":shard": _s(schema.pending_shard(record_id, Status.FAILED)),
        }

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
        result = self._fenced_update(
            lock,
            "SET #lease = :lease, #pa = :lease, #upd = :now_ms, #exp = :ttl",
            {
                ":lease": _n(lease_until),
                ":now_ms": _n(now_ms),
                ":ttl": _n(self._ttl(now_ms // 1000, lease_until)),
            },
            leaves=Status.IN_PROGRESS,
        )
        if result.ok:
            return replace(result, lock=replace(lock, lease_expires_at_ms=lease_until))
        return result

    def _fenced_update(
        self, lock: Lock, update: str, values: dict[str, Any], leaves: Status
    ) -> WriteResult:
        """A write conditioned on holding the lock.

        A refusal whose returned item carries our own token in the state this write leaves is
        our own earlier attempt: the reply was lost and botocore retried, so it counts as done.
        """
        lock.own()  # a fork child's copy of the parent's lock never writes (LockInherited)
        values = {**values, ":tok": _s(lock.token), ":ip": _s(Status.IN_PROGRESS)}
        try:
            self.client.update_item(
                TableName=self.table_name,
                Key={schema.PARTITION_KEY: _s(lock.record_id)},
                UpdateExpression=update,
                ConditionExpression=_HOLDS_LOCK,
                ExpressionAttributeNames=_names(update + _HOLDS_LOCK),
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as lost:
            item = _returned_item(lost)
            current = StoredRecord.from_item(item) if item else None
            if current and current.lock_token == lock.token and current.status is leaves:
                return WriteResult(WriteStatus.OK, lock=lock, replay_nonce=current.replay_nonce)
            return WriteResult(WriteStatus.LEASE_LOST, current=current)
        nonce = values.get(":nonce", {}).get("S")
        return WriteResult(WriteStatus.OK, lock=lock, replay_nonce=nonce)

    def transaction(self, lock: Lock) -> Any:
        """DynamoDB has no transaction a business function could share with the record: its
        effects are fenced instead (effects.put_once, ledger.record_effect)."""
        raise ConfigurationError(
            "ctx.transaction needs the PostgreSQL store (IDEMPOTENCY_DSN); on DynamoDB use a "
            "fenced effect (exactly_once.effects.put_once)"
        )

    def discard(self, lock: Lock) -> None:
        """Nothing to roll back: every write here is its own conditional write."""

    # -- reads and operator actions ----------------------------------------------------------

    def get(self, scope: str, key: str) -> StoredRecord | None:
        """The live record, or None when absent or TTL-expired (TTL deletion lags)."""
        return self.get_by_id(schema.record_id(scope, key))

    def get_by_id(self, record_id: str) -> StoredRecord | None:
        response = self.client.get_item(
            TableName=self.table_name,
            Key={schema.PARTITION_KEY: _s(record_id)},
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item:
            return None
        record = StoredRecord.from_item(dict(item))
        return None if record.is_expired(self._clock()) else record

    def list_pending(
        self, status: Status, *, stuck_only: bool = False, limit: int | None = None
    ) -> Iterator[StoredRecord]:
        """IN_PROGRESS or FAILED records from the sparse index, without a Scan.

        `stuck_only` keeps IN_PROGRESS records whose lease has expired. The index is
        eventually consistent, so a record may show up briefly after it moved on.
        """
        if status is Status.COMPLETED:
            raise ValueError("completed records are not in the pending index")
        now = self._clock()
        condition = "#ps = :shard"
        values: dict[str, Any] = {}
        if stuck_only and status is Status.IN_PROGRESS:
            condition += " AND #pa < :now_ms"
            values[":now_ms"] = _n(int(now * 1000))
        found = 0
        for shard in schema.all_pending_shards(status):
            kwargs: dict[str, Any] = {
                "TableName": self.table_name,
                "IndexName": schema.PENDING_INDEX,
                "KeyConditionExpression": condition,
                "ExpressionAttributeNames": _names(condition),
                "ExpressionAttributeValues": {**values, ":shard": _s(shard)},
            }
            while True:
                page = self.client.query(**kwargs)
                for item in page.get("Items", []):
                    record = StoredRecord.from_item(dict(item))
                    if record.status is not status or record.is_expired(now):
                        continue
                    yield record
                    found += 1
                    if limit is not None and found >= limit:
                        return
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

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
                Key={schema.PARTITION_KEY: _s(schema.record_id(scope, key))},
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=_names(update + condition),
                ExpressionAttributeValues={
                    ":true": {"BOOL": True},
                    ":now_ms": _n(now_ms),
                    ":failed": _s(Status.FAILED),
                },
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        return True
