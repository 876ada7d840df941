"""The words the DynamoDB store's requests are made of: attribute placeholders, typed values,
the condition and update every holder's write shares, and the old item a refusal hands back.

Kept apart from the requests because all of them (the acquire, the fenced writes, the reads and
the operator's reset) must spell an attribute the same way: several attribute names are
DynamoDB reserved words, and DynamoDB rejects a placeholder that an expression does not use.
"""

from __future__ import annotations

from typing import Any

from exactly_once.stores import schema
from exactly_once.stores.records import ErrorInfo, Item
from exactly_once.stores.schema import Status

# Every attribute goes through a placeholder: several of them (status, owner, result, error)
# are DynamoDB reserved words, and one rule for all is easier to get right.
NAMES = {
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

HOLDS_LOCK = "#tok = :tok AND #st = :ip"
MARK_FAILED = (
    "SET #st = :failed, #err = :err, #upd = :now_ms, #exp = :ttl, #ps = :shard, #pa = :now_ms"
)


def names(expression: str) -> dict[str, str]:
    """Only the placeholders an expression uses: DynamoDB rejects unused ones."""
    return {k: v for k, v in NAMES.items() if k in expression}


def returned_item(refused: Exception) -> Item | None:
    """The old item that ReturnValuesOnConditionCheckFailure=ALL_OLD puts in the error."""
    item = getattr(refused, "response", {}).get("Item")
    return dict(item) if item else None


def s(value: str) -> dict[str, str]:
    return {"S": value}


def n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def failure_values(
    record_id: str, error: ErrorInfo, now: float, failed_ttl_s: int
) -> dict[str, Any]:
    """The values MARK_FAILED writes: the error, and a TTL as long as a failure is kept."""
    now_ms = int(now * 1000)
    return {
        ":failed": s(Status.FAILED),
        ":err": error.to_attribute(now_ms),
        ":now_ms": n(now_ms),
        ":ttl": n(int(now) + failed_ttl_s),
        ":shard": s(schema.pending_shard(record_id, Status.FAILED)),
    }
