"""Each library gets the table schema it expects, on the same DynamoDB Local."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.tables import create_idempotency_table

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

__all__ = ["create_idempotency_table", "create_powertools_table"]


def create_powertools_table(client: DynamoDBClient, name: str) -> None:
    """Powertools' documented schema: partition key `id` (S), TTL on `expiration`."""
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
