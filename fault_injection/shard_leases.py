"""Shard leases for the Kinesis chaos pollers: one poller per shard at a time, as Lambda's event
source mapping keeps it, with the shard's checkpoint fenced by the lease.

One DynamoDB item per shard (the KCL's lease table, in miniature): its owner, a counter that
every take increments, when the lease expires, and the checkpoint (the last sequence number
whose record is done). A poller that goes silent (killed, or frozen as a zombie) stops renewing;
once its lease has expired another poller takes the shard and reads on from the checkpoint,
so whatever the silent one did after its last checkpoint is delivered again: that is where a
stream's duplicates come from. A checkpoint is written only on the condition that the lease is
still the writer's (owner and counter), so a zombie that wakes cannot move a checkpoint it no
longer owns, backwards or forwards.

The lease table has a client of its own, not the layer's: the faults injected into the
consumer's DynamoDB calls do not reach it (Lambda's checkpoints are not the function's I/O).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class Lease:
    shard: str
    owner: str
    counter: int
    checkpoint: str | None  # None: nothing done yet, read from the shard's start


def _now_ms() -> int:
    return int(time.time() * 1000)


def create_lease_table(ddb: DynamoDBClient, table: str, shards: list[str]) -> None:
    """The table, with one unowned lease per shard."""
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "shard", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "shard", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1})
    for shard in shards:
        ddb.put_item(TableName=table, Item={"shard": {"S": shard}, "counter": {"N": "0"}})


def _lease(item: dict[str, Any]) -> Lease:
    checkpoint = item.get("checkpoint", {}).get("S")
    return Lease(item["shard"]["S"], item["owner"]["S"], int(item["counter"]["N"]), checkpoint)


def _refused(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


class ShardLeases:
    """One poller's view of the lease table: `owner` names the poller (its pid)."""

    def __init__(self, ddb: DynamoDBClient, table: str, owner: str, duration_s: float) -> None:
        self.ddb = ddb
        self.table = table
        self.owner = owner
        self.duration_ms = int(duration_s * 1000)

    def states(self) -> list[dict[str, Any]]:
        """Every shard's item as stored (consistent read)."""
        items: list[dict[str, Any]] = []
        for page in self.ddb.get_paginator("scan").paginate(
            TableName=self.table, ConsistentRead=True
        ):
            items.extend(page.get("Items", []))
        return items

    def free_shards(self) -> list[str]:
        """Shards with no owner, or whose owner let the lease expire."""
        now = _now_ms()
        return [
            item["shard"]["S"]
            for item in self.states()
            if "owner" not in item or int(item.get("expires_ms", {}).get("N", "0")) < now
        ]

    def take(self, shard: str) -> Lease | None:
        """The shard's lease, if it is free (another poller may win the race: None)."""
        now = _now_ms()
        try:
            item = self.ddb.update_item(
                TableName=self.table,
                Key={"shard": {"S": shard}},
                UpdateExpression="SET #o = :me, expires_ms = :exp ADD #c :one",
                ConditionExpression="attribute_not_exists(#o) OR expires_ms < :now",
                ExpressionAttributeNames={"#o": "owner", "#c": "counter"},
                ExpressionAttributeValues={
                    ":me": {"S": self.owner},
                    ":exp": {"N": str(now + self.duration_ms)},
                    ":now": {"N": str(now)},
                    ":one": {"N": "1"},
                },
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as exc:
            if _refused(exc):
                return None
            raise
        return _lease(item)

    def renew(self, lease: Lease) -> Lease | None:
        """Extend the lease (with the stored checkpoint); None when it is no longer ours."""
        return self._update(lease, "SET expires_ms = :exp", {})

    def checkpoint(self, lease: Lease, sequence: str) -> Lease | None:
        """Record `sequence` as done; None (nothing written) when the lease is no longer ours."""
        return self._update(
            lease, "SET expires_ms = :exp, checkpoint = :seq", {":seq": {"S": sequence}}
        )

    def release(self, lease: Lease) -> None:
        """Give the shard up at once (a clean stop), if it is still ours."""
        try:
            self.ddb.update_item(
                TableName=self.table,
                Key={"shard": {"S": lease.shard}},
                UpdateExpression="REMOVE #o, expires_ms",
                ConditionExpression="#o = :me AND #c = :c",
                ExpressionAttributeNames={"#o": "owner", "#c": "counter"},
                ExpressionAttributeValues={
                    ":me": {"S": self.owner},
                    ":c": {"N": str(lease.counter)},
                },
            )
        except ClientError as exc:
            if not _refused(exc):
                raise

    def _update(self, lease: Lease, expression: str, values: dict[str, Any]) -> Lease | None:
        try:
            item = self.ddb.update_item(
                TableName=self.table,
                Key={"shard": {"S": lease.shard}},
                UpdateExpression=expression,
                ConditionExpression="#o = :me AND #c = :c",
                ExpressionAttributeNames={"#o": "owner", "#c": "counter"},
                ExpressionAttributeValues={
                    ":me": {"S": self.owner},
                    ":c": {"N": str(lease.counter)},
                    ":exp": {"N": str(_now_ms() + self.duration_ms)},
                    **values,
                },
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as exc:
            if _refused(exc):
                return None
            raise
        return _lease(item)
