"""Create the idempotency and ledger tables directly (tests, benchmarks, the local stack).

The CDK stack is the source of truth in AWS; this mirrors its key schema for DynamoDB Local.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from exactly_once.stores import schema

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def create_idempotency_table(client: DynamoDBClient, name: str) -> None:
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": schema.PARTITION_KEY, "AttributeType": "S"},
            {"AttributeName": schema.PENDING_SHARD, "AttributeType": "S"},
            {"AttributeName": schema.PENDING_AT, "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": schema.PARTITION_KEY, "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": schema.PENDING_INDEX,
                "KeySchema": [
                    {"AttributeName": schema.PENDING_SHARD, "KeyType": "HASH"},
                    {"AttributeName": schema.PENDING_AT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})


def create_ledger_table(client: DynamoDBClient, name: str) -> None:
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
    )
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})


def create_powertools_table(client: DynamoDBClient, name: str) -> None:
    """Powertools' documented idempotency schema (key `id`, TTL `expiration`), for comparisons."""
    client.create_table(
        TableName=name,
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
    )
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})
    client.update_time_to_live(
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"},
    )
