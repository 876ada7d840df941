"""Apply a DynamoDB side effect exactly once per key, fenced by the idempotency record.

The record alone cannot make an effect outside it exactly-once: a holder killed after its
effect and before completion, or one frozen past its lease while another takes over, would
leave a second effect. So the effect item and a mark on the record (`effect_fence`) go in ONE
transaction, conditioned on the record still being held at this invocation's fence:

- a zombie (its fence has moved on) is refused with `LeaseLost`, and its message is retried;
- a takeover after a crash between effect and completion finds the mark and skips the effect.

Measured under fault injection (docs/chaos.md): 0 double effects in 10,000 messages, where a
plain PutItem gave 218.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exactly_once import schema
from exactly_once.schema import Status

if TYPE_CHECKING:
    from exactly_once.processor import RecordContext


class LeaseLost(Exception):
    """Another holder owns the record now: this execution must not apply its effect."""


def put_once(ctx: RecordContext, table: str, item: dict[str, Any]) -> bool:
    """Put `item` (low-level attribute values) into `table` as this key's one effect.

    True: written now. False: an earlier holder of this key already applied it (it died
    before completing). Raises LeaseLost when a newer holder owns the record.
    """
    store, lock = ctx._store, ctx._lock
    if store is None or lock is None:
        raise LeaseLost("this context holds no lock")
    client = store.client
    record_key = {schema.PARTITION_KEY: {"S": lock.record_id}}
    try:
        client.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": store.table_name,
                        "Key": record_key,
                        "UpdateExpression": "SET #applied = :fence",
                        "ConditionExpression": (
                            "#tok = :tok AND #st = :ip AND attribute_not_exists(#applied)"
                        ),
                        "ExpressionAttributeNames": {
                            "#applied": schema.EFFECT_FENCE,
                            "#tok": schema.LOCK_TOKEN,
                            "#st": schema.STATUS,
                        },
                        "ExpressionAttributeValues": {
                            ":fence": {"N": str(lock.fence)},
                            ":tok": {"S": lock.token},
                            ":ip": {"S": Status.IN_PROGRESS.value},
                        },
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                {"Put": {"TableName": table, "Item": item}},
            ]
        )
    except client.exceptions.TransactionCanceledException as cancelled:
        reasons = getattr(cancelled, "response", {}).get("CancellationReasons") or [{}]
        if reasons[0].get("Code") != "ConditionalCheckFailed":
            raise  # a conflict or throttling inside the transaction: the record is retried
        current = reasons[0].get("Item") or {}
        held = current.get(schema.LOCK_TOKEN, {}).get("S") == lock.token
        if held and current.get(schema.STATUS, {}).get("S") == Status.IN_PROGRESS.value:
            return False  # still ours, so the mark is what failed: the effect is already applied
        raise LeaseLost(
            f"{lock.record_id} is no longer held at fence {lock.fence}: the effect is refused"
        ) from cancelled
    return True
