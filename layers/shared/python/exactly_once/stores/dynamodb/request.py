"""What one `acquire` asks of DynamoDB, built without touching it: the request (the caller's
clock reading and a new token), the UpdateItem that takes the record, the PutItem that replaces
a TTL-expired one, and the lock the replaced item's fence and attempts make.

Apart from the calls (acquisition.py) because the conditions are where the state machine's
rules live (who may take a record over, which failure may run again, when a fingerprint
refuses), and they read best as expressions on their own, not between the calls and the
handling of their refusals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exactly_once.stores import schema
from exactly_once.stores.dynamodb.expressions import n, s
from exactly_once.stores.records import AcquireStatus, Acquisition, Item, Lock
from exactly_once.stores.schema import Status


@dataclass(frozen=True)
class Request:
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


def resumed(old: Item, req: Request) -> bool:
    """The acquire resumed this holder's own IN_PROGRESS lock (the same `resume_id`)."""
    return (
        req.resume_id is not None
        and old.get(schema.STATUS, {}).get("S") == Status.IN_PROGRESS
        and old.get(schema.RESUME_ID, {}).get("S") == req.resume_id
    )


def take(req: Request, replay_nonce: str | None) -> tuple[str, str, dict[str, Any]]:
    """The UpdateItem's update, condition and values that take the record for `req`.

    The condition lets through what `IdempotencyStore.acquire` calls acquirable; the update
    writes the new lock, bumps the fence from the caller's clock when the item is gone, and
    removes what the last generation's outcome left.
    """
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
        ":ip": s(Status.IN_PROGRESS),
        ":tok": s(req.token),
        ":lease": n(req.lease_until_ms),
        ":own": s(req.owner),
        ":now_ms": n(req.now_ms),
        ":now_s": n(req.now_s),
        ":ttl": n(req.ttl_s),
        ":shard": s(schema.pending_shard(req.record_id, Status.IN_PROGRESS)),
        ":one": n(1),
        ":failed": s(Status.FAILED),
        ":true": {"BOOL": True},
    }
    if req.fingerprint is not None:
        sets.append("#fp = :fp")
        values[":fp"] = s(req.fingerprint)
    if req.expected_by_ms is not None:
        sets.append("#xby = :xby")
        values[":xby"] = n(req.expected_by_ms)
    removed = "#res, #rsha, #rsize, #romit, #err, #nonce"
    if req.resume_id is not None:
        sets.append("#rid = :rid")
        values[":rid"] = s(req.resume_id)
    else:
        removed += ", #rid"  # a holder that took the lock over must never be resumed
    update = f"SET {', '.join(sets)} ADD #att :one REMOVE {removed}"

    # AND binds tighter than OR, and DynamoDB rejects redundant parentheses, so the live
    # and fingerprint checks are repeated in each clause instead of wrapping them all.
    takeover = not (req.block_takeover or req.skewed)
    reacquirable = ["#st = :ip AND #lease < :now_ms"] if takeover else []
    reacquirable.append("#st = :failed AND #err.#retry = :true")
    if replay_nonce:
        reacquirable.append("#st = :failed AND #nonce = :nonce")
        values[":nonce"] = s(replay_nonce)
    if req.resume_id is not None:
        reacquirable.append("#st = :ip AND #rid = :rid")
    live = "#exp >= :now_s AND "
    same_payload = "(attribute_not_exists(#fp) OR #fp = :fp) AND " if req.fingerprint else ""
    condition = " OR ".join(
        ["attribute_not_exists(#id)"] + [live + same_payload + c for c in reacquirable]
    )
    return update, condition, values


def taken(old: Item, req: Request) -> Acquisition:
    """The acquisition `take` made, from the attributes it replaced (UPDATED_OLD)."""
    old_status = old.get(schema.STATUS, {}).get("S")
    old_fence = old.get(schema.FENCE)
    fence = int(old_fence["N"]) + 1 if old_fence else req.now_ms + 1
    attempt = int(old.get(schema.ATTEMPTS, {"N": "0"})["N"]) + 1
    return Acquisition(
        AcquireStatus.ACQUIRED,
        lock=req.lock(fence, attempt),
        takeover=old_status == Status.IN_PROGRESS,
        retry=old_status == Status.FAILED,
        resumed=resumed(old, req),
    )


def renewal(item: Item, req: Request, fence: int) -> tuple[Item, str, dict[str, Any]]:
    """The PutItem's new generation at `fence`, and the condition (with its values) that it
    replaces the TTL-expired `item` only while that is exactly as read, or gone."""
    new: Item = {
        schema.PARTITION_KEY: s(req.record_id),
        schema.STATUS: s(Status.IN_PROGRESS),
        schema.LOCK_TOKEN: s(req.token),
        schema.LEASE_EXPIRES_AT: n(req.lease_until_ms),
        schema.OWNER: s(req.owner),
        schema.CREATED_AT: n(req.now_ms),
        schema.UPDATED_AT: n(req.now_ms),
        schema.TTL: n(req.ttl_s),
        schema.PENDING_SHARD: s(schema.pending_shard(req.record_id, Status.IN_PROGRESS)),
        schema.PENDING_AT: n(req.lease_until_ms),
        schema.FENCE: n(fence),
        schema.ATTEMPTS: n(1),
    }
    if req.fingerprint is not None:
        new[schema.FINGERPRINT] = s(req.fingerprint)
    if req.expected_by_ms is not None:
        new[schema.EXPECTED_BY] = n(req.expected_by_ms)
    if req.resume_id is not None:
        new[schema.RESUME_ID] = s(req.resume_id)
    # Gone since we read it (the TTL sweep): absent is as good. Else exactly as read. AND
    # binds tighter than OR, and DynamoDB rejects redundant parentheses.
    unchanged = ["#exp < :now_s"]
    values: dict[str, Any] = {":now_s": n(req.now_s)}
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
    return new, condition, values
