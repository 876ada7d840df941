"""Step 2's business write, the shipment row, on either store: it commits with the step's
recovery point, or not at all.

- PostgreSQL: the row is inserted in the step's own transaction (`step.transaction`), which the
  store commits in one round trip with the recovery point: an atomic phase.
- DynamoDB: the row is a Put carried by the step (`step.put`), committed in one
  `TransactWriteItems` with the recovery point, fenced on the holder's lock.

Neither table has a constraint that would turn a second shipment for an order into an error
(each row has an id of its own): exactly once must come from the steps, and the tests count the
rows.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Protocol

from exactly_once.steps.step import Step

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from examples.checkout_steps.checkout import Order


class Shipments(Protocol):
    def create(self, step: Step, order: Order, charge_id: str) -> str:
        """Add the order's shipment to the step's writes; returns the shipment's id."""
        ...


class PostgresShipments:
    """`shipments` in a schema of its own, written in the step's transaction."""

    def __init__(self, schema: str = "shop") -> None:
        self.schema = schema

    def create(self, step: Step, order: Order, charge_id: str) -> str:
        from psycopg import sql

        row = step.transaction.execute(
            sql.SQL(
                "INSERT INTO {} (order_id, charge_id, fence) VALUES (%s, %s, %s) RETURNING id"
            ).format(sql.Identifier(self.schema, "shipments")),
            (order.order_id, charge_id, step.fence),
        ).fetchone()
        return f"shp_{row[0]}"


class DynamoShipments:
    """Items `(pk=order id, sk=shipment#<id>)` in a table of their own, put with the step."""

    def __init__(self, table_name: str) -> None:
        self.table_name = table_name

    def create(self, step: Step, order: Order, charge_id: str) -> str:
        shipment_id = f"shp_{uuid.uuid4().hex[:12]}"
        item: dict[str, Any] = {
            "pk": {"S": order.order_id},
            "sk": {"S": f"shipment#{shipment_id}"},
            "charge_id": {"S": charge_id},
            "fence": {"N": str(step.fence)},
        }
        step.put(self.table_name, item)
        return shipment_id


def create_postgres_table(dsn: str, schema: str = "shop") -> None:
    """The schema and its `shipments` table (idempotent)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (id bigserial PRIMARY KEY, order_id text NOT NULL, "
                "charge_id text NOT NULL, fence bigint NOT NULL)"
            ).format(sql.Identifier(schema, "shipments"))
        )


def create_dynamodb_table(client: DynamoDBClient, name: str) -> None:
    """The shipments table: `pk` (the order id) and `sk` (`shipment#<id>`)."""
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
