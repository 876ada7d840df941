"""The holder's writes after `acquire` (complete, fail, release, extend), each conditioned on
holding the lock, and how a refusal is told apart from our own earlier attempt.

Every one of them goes through `fenced_update`, so the rule that keeps a zombie out (the lock
token and IN_PROGRESS, or nothing is written) and the rule that keeps a lost reply from
turning into "lease lost" (the refusal returns the item our own retried write left) are
written once. Apart from the store class because those two rules are the fencing; the class
only says which update each operation makes.
"""

from __future__ import annotations

from typing import Any

from exactly_once.stores import schema
from exactly_once.stores.dynamodb.expressions import HOLDS_LOCK, n, names, returned_item, s
from exactly_once.stores.dynamodb.table import Table
from exactly_once.stores.records import Lock, StoredRecord, WriteResult, WriteStatus
from exactly_once.stores.schema import Status
from exactly_once.stores.stored_result import StoredResult


def completion(kept: StoredResult, now_ms: int, ttl_s: int) -> tuple[str, dict[str, Any]]:
    """The update (and its values) that marks a record COMPLETED with the result as kept:
    its text, or its digest and size when over the cap. It leaves the pending index."""
    values: dict[str, Any] = {
        ":done": s(Status.COMPLETED),
        ":now_ms": n(now_ms),
        ":ttl": n(ttl_s),
    }
    sets = ["#st = :done", "#upd = :now_ms", "#exp = :ttl"]
    for placeholder, value in (
        ("#res", None if kept.text is None else s(kept.text)),
        ("#rsha", None if kept.sha256 is None else s(kept.sha256)),
        ("#rsize", None if kept.size is None else n(kept.size)),
        ("#romit", None if kept.omitted is None else s(kept.omitted)),
    ):
        if value is not None:
            sets.append(f"{placeholder} = :{placeholder[1:]}")
            values[f":{placeholder[1:]}"] = value
    return f"SET {', '.join(sets)} REMOVE #ps, #pa", values


def fenced_update(
    table: Table, lock: Lock, update: str, values: dict[str, Any], leaves: Status
) -> WriteResult:
    """A write conditioned on holding the lock.

    A refusal whose returned item carries our own token in the state this write leaves is
    our own earlier attempt: the reply was lost and botocore retried, so it counts as done.
    """
    lock.own()  # a fork child's copy of the parent's lock never writes (LockInherited)
    values = {**values, ":tok": s(lock.token), ":ip": s(Status.IN_PROGRESS)}
    try:
        table.client.update_item(
            TableName=table.table_name,
            Key={schema.PARTITION_KEY: s(lock.record_id)},
            UpdateExpression=update,
            ConditionExpression=HOLDS_LOCK,
            ExpressionAttributeNames=names(update + HOLDS_LOCK),
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except table.client.exceptions.ConditionalCheckFailedException as lost:
        item = returned_item(lost)
        current = StoredRecord.from_item(item) if item else None
        if current and current.lock_token == lock.token and current.status is leaves:
            return WriteResult(WriteStatus.OK, lock=lock, replay_nonce=current.replay_nonce)
        return WriteResult(WriteStatus.LEASE_LOST, current=current)
    nonce = values.get(":nonce", {}).get("S")
    return WriteResult(WriteStatus.OK, lock=lock, replay_nonce=nonce)


def item_too_large(error: Exception) -> bool:
    """DynamoDB refused the write because the item would pass its 400 KB limit."""
    response = getattr(error, "response", {})
    code = response.get("Error", {}).get("Code", "")
    message = str(response.get("Error", {}).get("Message", ""))
    return code == "ValidationException" and "size" in message.lower()
