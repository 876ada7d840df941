"""A step's recovery point on DynamoDB: one fenced write of `step#<position>` on the record,
with the step's own fenced writes in the same `TransactWriteItems` when it has any.

Fenced like every holder's write (the lock token and IN_PROGRESS), and conditioned on the
position being empty, so a zombie's step is refused and a step is recorded once per
generation. A refusal brings back the record (ALL_OLD): our own point there means our earlier
attempt committed and its reply was lost (botocore retried), which counts as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from exactly_once.errors import StepResultUnstorable, StepWriteRefused
from exactly_once.stores import schema
from exactly_once.stores.dynamodb.expressions import HOLDS_LOCK, n, names, returned_item, s
from exactly_once.stores.dynamodb.fenced_writes import item_too_large
from exactly_once.stores.dynamodb.table import Table
from exactly_once.stores.records import Lock, StepPoint, StoredRecord, WriteResult, WriteStatus
from exactly_once.stores.schema import Status

MAX_WRITES = schema.MAX_STEP_WRITES
_CONDITION = f"{HOLDS_LOCK} AND attribute_not_exists(#sp)"


def record_step(
    table: Table, lock: Lock, point: StepPoint, writes: Sequence[dict[str, Any]]
) -> WriteResult:
    """Write `point` fenced on `lock`, with `writes` (TransactWriteItems entries) atomically."""
    lock.own()  # a fork child's copy of its parent's lock records nothing (LockInherited)
    if len(writes) > MAX_WRITES:  # Step.write refuses the 100th; a store's caller may not
        raise StepWriteRefused(f"a step carries at most {MAX_WRITES} writes", MAX_WRITES)
    update = "SET #sp = :point, #upd = :now_ms"
    request: dict[str, Any] = {
        "TableName": table.table_name,
        "Key": {schema.PARTITION_KEY: s(lock.record_id)},
        "UpdateExpression": update,
        "ConditionExpression": _CONDITION,
        "ExpressionAttributeNames": {
            **names(update + _CONDITION),
            "#sp": schema.step_attribute(point.position),
        },
        "ExpressionAttributeValues": {
            ":point": point.to_attribute(),
            ":now_ms": n(point.at_ms),
            ":tok": s(lock.token),
            ":ip": s(Status.IN_PROGRESS),
        },
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    client: Any = table.client  # the request is built as a plain dict, checked by botocore
    try:
        if not writes:
            client.update_item(**request)
        else:
            client.transact_write_items(TransactItems=[{"Update": request}, *writes])
    except client.exceptions.ConditionalCheckFailedException as refused:
        return _refused(returned_item(refused), lock, point)
    except client.exceptions.TransactionCanceledException as cancelled:
        reasons = getattr(cancelled, "response", {}).get("CancellationReasons") or []
        codes = [reason.get("Code") for reason in reasons]
        if codes[:1] == ["ConditionalCheckFailed"]:
            return _refused(reasons[0].get("Item"), lock, point)
        if codes[:1] == ["ValidationError"] and "size" in str(reasons[0].get("Message")).lower():
            raise _unstorable(point) from cancelled  # the point would outgrow the record
        for index, code in enumerate(codes[1:]):
            if code == "ConditionalCheckFailed":
                raise StepWriteRefused(
                    f"step {point.name!r}: its write {index} was refused by its condition; "
                    "nothing of the step was written",
                    index,
                ) from cancelled
        raise  # a conflict or throttling inside the transaction: nothing was written
    except client.exceptions.ClientError as error:
        if item_too_large(error):
            raise _unstorable(point) from error
        raise
    return WriteResult(WriteStatus.OK, lock=lock)


def _refused(item: dict[str, Any] | None, lock: Lock, point: StepPoint) -> WriteResult:
    """Our own point already there (a lost reply), or the key is no longer ours."""
    current = StoredRecord.from_item(dict(item)) if item else None
    if current is not None and current.lock_token == lock.token:
        mine = current.steps.get(point.position)
        if (
            current.status is Status.IN_PROGRESS
            and mine is not None
            and (mine.fence, mine.name, mine.result_text)
            == (lock.fence, point.name, point.result_text)
        ):
            return WriteResult(WriteStatus.OK, lock=lock)
    return WriteResult(WriteStatus.LEASE_LOST, current=current)


def _unstorable(point: StepPoint) -> StepResultUnstorable:
    return StepResultUnstorable(
        f"step {point.name!r}: the record would exceed DynamoDB's 400 KB item limit with this "
        "recovery point; keep step results small"
    )
