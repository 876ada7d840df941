"""The service's entry point: `python -m examples.kafka_order_processor.service`.

Settings from the environment: KAFKA_BOOTSTRAP_SERVERS, ORDERS_TOPIC (default
`orders.created`), CONSUMER_GROUP (default `order-processor`), IDEMPOTENCY_DSN (a libpq DSN;
`eonce db migrate` applied), ORDERS_SCHEMA (default `shop`). Auto-commit is off: the loop
commits each offset itself, after the order's key is complete.
"""

from __future__ import annotations

import os
from typing import Any

from examples.kafka_order_processor.consumer import Progress, run
from examples.kafka_order_processor.processor import OrderProcessor
from examples.kafka_order_processor.schema import create_tables


def consumer_settings(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    """confluent_kafka.Consumer settings: no auto-commit, and no offset stored for us."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "enable.auto.commit": False,  # the loop commits, after the key is complete
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",  # a new group starts at the log's beginning
        **extra,
    }


def main() -> Progress:
    from confluent_kafka import Consumer  # the service's dependency, not the library's

    dsn = os.environ["IDEMPOTENCY_DSN"]
    schema = os.environ.get("ORDERS_SCHEMA", "shop")
    create_tables(dsn, schema)
    consumer = Consumer(
        consumer_settings(
            os.environ["KAFKA_BOOTSTRAP_SERVERS"],
            os.environ.get("CONSUMER_GROUP", "order-processor"),
        )
    )
    consumer.subscribe([os.environ.get("ORDERS_TOPIC", "orders.created")])
    try:
        return run(consumer, OrderProcessor(dsn, schema=schema))
    finally:
        consumer.close()  # leave the group at once, so a rebalance need not wait


if __name__ == "__main__":
    main()
