"""Taking a record: the conditional writes of an `acquire`, and what their refusals mean.

One UpdateItem takes the record. A refusal brings back the old item (ALL_OLD), and this module
reads the verdict from that item alone, with no second read: our own write whose reply was
lost (botocore's retry met it), a TTL-expired record to replace whole by a new generation, an
expired lease to mark FAILED for a person instead of taking it over (`block_takeover`), or a
refusal the caller reports. Apart from the store class because this is the one place where a
write leads to another (a renewal or a block, each refused in turn), and the chain reads best
in one piece. The requests themselves are built in request.py.
"""

from __future__ import annotations

import secrets
from dataclasses import replace

from exactly_once.stores import schema
from exactly_once.stores.dynamodb import request
from exactly_once.stores.dynamodb.expressions import (
    HOLDS_LOCK,
    MARK_FAILED,
    failure_values,
    names,
    returned_item,
    s,
)
from exactly_once.stores.dynamodb.request import Request
from exactly_once.stores.dynamodb.table import Table
from exactly_once.stores.records import AcquireStatus, Acquisition, ErrorInfo, Item, StoredRecord
from exactly_once.stores.schema import Status

RENEWALS = 3  # a TTL-expired record raced by other renewers: give up (reported, retried) after this


def take(table: Table, req: Request, replay_nonce: str | None) -> Acquisition:
    """Take the record with ONE UpdateItem; on refusal, decide from the item it returns."""
    update, condition, values = request.take(req, replay_nonce)
    try:
        response = table.client.update_item(
            TableName=table.table_name,
            Key={schema.PARTITION_KEY: s(req.record_id)},
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=names(update + condition),
            ExpressionAttributeValues=values,
            ReturnValues="UPDATED_OLD",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except table.client.exceptions.ConditionalCheckFailedException as denied:
        return refused(table, returned_item(denied), req, RENEWALS)
    return request.taken(dict(response.get("Attributes", {})), req)


def refused(table: Table, item: Item | None, req: Request, renewals: int) -> Acquisition:
    """What a refused acquisition means, from the item DynamoDB returned with the refusal
    (an UpdateItem's ALL_OLD, or a batch statement's; batched.py reads its refusals here)."""
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
        return _block(table, record, req)  # its holder may have paid: a person decides
    if expired:
        if renewals > 0:
            return _renew(table, item, record, req, renewals - 1)
        return Acquisition(AcquireStatus.IN_PROGRESS, record=record)  # contended: retry later
    if req.fingerprint is not None and record.fingerprint not in (None, req.fingerprint):
        return Acquisition(AcquireStatus.FINGERPRINT_MISMATCH, record=record)
    if record.status is Status.COMPLETED:
        return Acquisition(AcquireStatus.ALREADY_COMPLETED, record=record)
    if record.status is Status.FAILED:
        return Acquisition(AcquireStatus.FAILED_PERMANENTLY, record=record)
    if req.block_takeover and record.lease_expired(req.now_ms):
        return _block(table, record, req)
    return Acquisition(AcquireStatus.IN_PROGRESS, record=record)


def _renew(table: Table, item: Item, old: StoredRecord, req: Request, renewals: int) -> Acquisition:
    """Replace a TTL-expired record with a new generation, in one conditional PutItem.

    One write, so no crash or throttle can leave half a generation behind: the old effect
    marks, attempts and result go with the old item. The condition holds only while the item
    is exactly as read (every write moves its token, status or update time) or gone. A
    zombie's effect mark written in between may be dropped: its effect item still refuses
    a second effect (effects.put_once).
    """
    fence = max(old.fence, req.now_ms) + 1
    new, condition, values = request.renewal(item, req, fence)
    try:
        table.client.put_item(
            TableName=table.table_name,
            Item=new,
            ConditionExpression=condition,
            ExpressionAttributeNames=names(condition),
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except table.client.exceptions.ConditionalCheckFailedException as denied:
        return refused(table, returned_item(denied), req, renewals)
    return Acquisition(
        AcquireStatus.ACQUIRED, lock=req.lock(fence, 1), resumed=request.resumed(item, req)
    )


def _block(table: Table, record: StoredRecord, req: Request) -> Acquisition:
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
    update = f"{MARK_FAILED}, #nonce = :nonce, #tok = :blocked"
    condition = f"{HOLDS_LOCK} AND #lease < :now_ms"
    blocked = secrets.token_hex(16)
    try:
        response = table.client.update_item(
            TableName=table.table_name,
            Key={schema.PARTITION_KEY: s(record.record_id)},
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeNames=names(update + condition),
            ExpressionAttributeValues={
                **failure_values(record.record_id, error, req.now_ms / 1000, table.failed_ttl_s),
                ":nonce": s(secrets.token_hex(16)),
                ":blocked": s(blocked),
                ":tok": s(record.lock_token or ""),
                ":ip": s(Status.IN_PROGRESS),
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except table.client.exceptions.ConditionalCheckFailedException as changed:
        item = returned_item(changed)
        if item is not None and item.get(schema.LOCK_TOKEN, {}).get("S") == blocked:
            # Our own block committed and its reply was lost; botocore's retry met it.
            return Acquisition(
                AcquireStatus.FAILED_PERMANENTLY, record=StoredRecord.from_item(item)
            )
        # The old holder finished (or someone else moved it) in between: report that state.
        return refused(table, item, replace(req, block_takeover=False), 0)
    return Acquisition(
        AcquireStatus.FAILED_PERMANENTLY,
        record=StoredRecord.from_item(dict(response["Attributes"])),
    )
