"""The fenced idempotency store: one DynamoDB record per (scope, key).

Every write after `acquire` is conditioned on the lock token and IN_PROGRESS, so an invocation
whose lease expired and was taken over (a zombie) can neither overwrite nor delete the new
holder's record. Failures are kept as FAILED records for people, not deleted.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from exactly_once import clients, codec, schema
from exactly_once.records import (
    AcquireStatus,
    Acquisition,
    ErrorInfo,
    Item,
    Lock,
    StoredRecord,
    WriteResult,
    WriteStatus,
)
from exactly_once.schema import Status

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

DAY_S = 86_400

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
    "#err": schema.ERROR,
    "#fp": schema.FINGERPRINT,
    "#ps": schema.PENDING_SHARD,
    "#pa": schema.PENDING_AT,
    "#retry": "retryable",
    "#applied": schema.EFFECT_FENCE,
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


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


class IdempotencyStore:
    """Lock, complete and fail idempotency records with conditional writes.

    `clock` returns epoch seconds; conditions compare against the caller's clock (DynamoDB
    cannot read server time), which is why leases carry a margin.
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
    ) -> None:
        # The default TTL outlives the DLQ's 14-day retention, so a replayed message that already
        # completed is still recognised as a duplicate.
        self.table_name = table_name
        self._client = client
        self.record_ttl_s = record_ttl_s
        self.failed_ttl_s = failed_ttl_s
        self.result_cap_bytes = result_cap_bytes
        self._clock = clock

    @property
    def client(self) -> DynamoDBClient:
        if self._client is None:
            self._client = clients.dynamodb()
        return self._client

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
        retry_permanent: bool = False,
    ) -> Acquisition:
        """Take the record with ONE UpdateItem; on refusal the old item comes back in the error.

        Acquirable: absent, TTL-expired, IN_PROGRESS with an expired lease (unless
        `block_takeover`), FAILED and retryable (any FAILED with `retry_permanent`, which a
        replay or a person asks for). A different fingerprint is never acquirable.
        """
        rid = schema.record_id(scope, key)
        now = self._clock()
        now_ms, now_s = int(now * 1000), int(now)
        token = secrets.token_hex(16)
        lease_until = now_ms + lease_ms

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
        ]
        values: dict[str, Any] = {
            ":ip": _s(Status.IN_PROGRESS),
            ":tok": _s(token),
            ":lease": _n(lease_until),
            ":own": _s(owner),
            ":now_ms": _n(now_ms),
            ":now_s": _n(now_s),
            ":ttl": _n(now_s + self.record_ttl_s),
            ":shard": _s(schema.pending_shard(rid, Status.IN_PROGRESS)),
            ":one": _n(1),
            ":failed": _s(Status.FAILED),
        }
        if fingerprint is not None:
            sets.append("#fp = :fp")
            values[":fp"] = _s(fingerprint)
        update = (
            f"SET {', '.join(sets)} ADD #fence :one, #att :one REMOVE #res, #rsha, #rsize, #err"
        )

        # AND binds tighter than OR, and DynamoDB rejects redundant parentheses, so the
        # fingerprint check is repeated in each clause instead of wrapping them all.
        reacquirable = [] if block_takeover else ["#st = :ip AND #lease < :now_ms"]
        if retry_permanent:
            reacquirable.append("#st = :failed")
        else:
            reacquirable.append("#st = :failed AND #err.#retry = :true")
            values[":true"] = {"BOOL": True}
        same_payload = "(attribute_not_exists(#fp) OR #fp = :fp) AND " if fingerprint else ""
        condition = " OR ".join(
            ["attribute_not_exists(#id)", "#exp < :now_s"]
            + [same_payload + clause for clause in reacquirable]
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
            return self._refused(_returned_item(refused), now, fingerprint, block_takeover)

        old: Item = dict(response.get("Attributes", {}))
        old_status = old.get(schema.STATUS, {}).get("S")
        old_live = old_status is not None and int(old.get(schema.TTL, {"N": "0"})["N"]) >= now_s
        lock = Lock(
            record_id=rid,
            token=token,
            fence=int(old.get(schema.FENCE, {"N": "0"})["N"]) + 1,
            attempt=int(old.get(schema.ATTEMPTS, {"N": "0"})["N"]) + 1,
            lease_expires_at_ms=lease_until,
        )
        if old_status is not None and not old_live:
            # A TTL-expired record is a new one: its old effect mark must not count. Rare, so a
            # second (fenced) write here keeps the common path at one call.
            self._fenced_update(lock, "REMOVE #applied", {})
        return Acquisition(
            AcquireStatus.ACQUIRED,
            lock=lock,
            takeover=old_live and old_status == Status.IN_PROGRESS,
            retry=old_live and old_status == Status.FAILED,
        )

    def _refused(
        self, item: Item | None, now: float, fingerprint: str | None, block_takeover: bool
    ) -> Acquisition:
        if item is None:  # cannot happen: a refused write on a missing item would have passed
            raise RuntimeError("conditional check failed without returning the item")
        record = StoredRecord.from_item(item)
        if fingerprint is not None and record.fingerprint not in (None, fingerprint):
            return Acquisition(AcquireStatus.FINGERPRINT_MISMATCH, record=record)
        if record.status is Status.COMPLETED:
            return Acquisition(AcquireStatus.ALREADY_COMPLETED, record=record)
        if record.status is Status.FAILED:
            return Acquisition(AcquireStatus.FAILED_PERMANENTLY, record=record)
        if block_takeover and record.lease_expired(int(now * 1000)):
            return self._block(record, now, fingerprint)
        return Acquisition(AcquireStatus.IN_PROGRESS, record=record)

    def _block(self, record: StoredRecord, now: float, fingerprint: str | None) -> Acquisition:
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
        condition = f"{_HOLDS_LOCK} AND #lease < :now_ms"
        try:
            response = self.client.update_item(
                TableName=self.table_name,
                Key={schema.PARTITION_KEY: _s(record.record_id)},
                UpdateExpression=_MARK_FAILED,
                ConditionExpression=condition,
                ExpressionAttributeNames=_names(_MARK_FAILED + condition),
                ExpressionAttributeValues={
                    **self._failure_values(record.record_id, error, now),
                    ":tok": _s(record.lock_token or ""),
                    ":ip": _s(Status.IN_PROGRESS),
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as changed:
            # The old holder finished (or someone else moved it) in between: report that state.
            return self._refused(_returned_item(changed), now, fingerprint, False)
        return Acquisition(
            AcquireStatus.FAILED_PERMANENTLY,
            record=StoredRecord.from_item(dict(response["Attributes"])),
        )

    # -- fenced writes -----------------------------------------------------------------------

    def complete(self, lock: Lock, result: Any = None) -> WriteResult:
        """Store the result and mark COMPLETED; never creates a record.

        A result over the cap (or one that cannot be encoded) is stored as its SHA-256 and
        size instead, so completion never fails because of the result.
        """
        now = self._clock()
        now_ms = int(now * 1000)
        try:
            encoded: str | None = codec.dumps(result)
        except (TypeError, ValueError):
            encoded = None
        values: dict[str, Any] = {
            ":done": _s(Status.COMPLETED),
            ":now_ms": _n(now_ms),
            ":ttl": _n(int(now) + self.record_ttl_s),
        }
        sets = ["#st = :done", "#upd = :now_ms", "#exp = :ttl"]
        size = len(encoded.encode("utf-8")) if encoded is not None else None
        if encoded is not None and size is not None and size <= self.result_cap_bytes:
            sets.append("#res = :res")
            values[":res"] = _s(encoded)
        else:
            text = encoded if encoded is not None else repr(result)
            sets += ["#rsha = :rsha", "#rsize = :rsize"]
            values[":rsha"] = _s(codec.sha256_hex(text))
            values[":rsize"] = _n(len(text.encode("utf-8")))
        return self._fenced_update(lock, f"SET {', '.join(sets)} REMOVE #ps, #pa", values)

    def fail(self, lock: Lock, error: ErrorInfo) -> WriteResult:
        """Keep the record as FAILED with the error, for the next delivery or for a person."""
        values = self._failure_values(lock.record_id, error, self._clock())
        return self._fenced_update(lock, _MARK_FAILED, values)

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
        """Renew the lease for work that outlives it. The new lock is in the result."""
        now_ms = int(self._clock() * 1000)
        lease_until = now_ms + lease_ms
        result = self._fenced_update(
            lock,
            "SET #lease = :lease, #pa = :lease, #upd = :now_ms",
            {":lease": _n(lease_until), ":now_ms": _n(now_ms)},
        )
        if result.ok:
            return replace(result, lock=replace(lock, lease_expires_at_ms=lease_until))
        return result

    def _fenced_update(self, lock: Lock, update: str, values: dict[str, Any]) -> WriteResult:
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
            return WriteResult(WriteStatus.LEASE_LOST, current=current)
        return WriteResult(WriteStatus.OK, lock=lock)

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
