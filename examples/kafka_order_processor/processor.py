"""The OrderProcessor: one Kafka record in, the order written once in PostgreSQL, an outcome out.

Each OrderCreated event is keyed by its order id with `once` on the PostgreSQL store, and the
order's row is written in the lock's own transaction (`claim.lock.transaction`), so the row and
the key's COMPLETED record commit together or not at all. A crash anywhere before that COMMIT
leaves nothing behind (the next holder writes the order afresh); a crash after it leaves a
completed key, which every redelivery of the record finds and skips. A holder that outlived its
lease while another took the key over (a consumer that lost its partition in a rebalance, then
woke) has its completion refused (`LeaseLost`) and its write rolled back with it.

What the consumer loop does with a record follows from the outcome alone (consumer.py): commit
its offset once the record is WRITTEN, a DUPLICATE or a DEAD_LETTER, and never after RETRY.
"""

from __future__ import annotations

import os
import socket
from enum import StrEnum
from typing import Any, Protocol

from psycopg import sql

from exactly_once import ClaimStatus, LeaseLost, once
from exactly_once.stores.postgres.store import PostgresStore
from examples.kafka_order_processor.orders import NotAnOrder, Order, read_order


class KafkaMessage(Protocol):
    """The accessors of confluent_kafka.Message this service reads."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...


class Outcome(StrEnum):
    WRITTEN = "written"  # this call wrote the order; its key is COMPLETED
    DUPLICATE = "duplicate"  # the key was completed before (a redelivery): nothing written
    DEAD_LETTER = "dead_letter"  # not an order, or the key's content differs: kept with reason
    RETRY = "retry"  # another holder has the key now, or its lease was lost: do not commit


def position(message: KafkaMessage) -> str:
    """`<topic>-<partition>:<offset>`, the record's place in the log (as the Lambda consumer
    names a Kafka record), the same on every redelivery."""
    return f"{message.topic()}-{message.partition()}:{message.offset()}"


class OrderProcessor:
    """Writes each OrderCreated event's order once; see the module docstring."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "shop",
        scope: str = "order-processor",
        lease_s: float = 30.0,
        name: str | None = None,
    ) -> None:
        self.store = PostgresStore(dsn)
        self.schema = sql.Identifier(schema)
        self.scope = scope
        self.lease_s = lease_s  # longer than one order's write; a takeover waits for its end
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"

    def process(self, message: KafkaMessage) -> Outcome:
        """The record's outcome. Raises what the database raises when it stays unreachable
        (the key is then FAILED and retryable, or still IN_PROGRESS until its lease ends)."""
        try:
            order = read_order(message.value())
        except NotAnOrder as poison:
            return self.dead_letter(message, str(poison))
        try:
            return self._write_once(message, order)
        except LeaseLost:  # a newer holder owns the key: our write rolled back; its decides
            return Outcome.RETRY

    def _write_once(self, message: KafkaMessage, order: Order) -> Outcome:
        with once(
            self.scope,
            order.order_id,
            store=self.store,
            lease_s=self.lease_s,
            fingerprint=order.fingerprint,
            owner=self.name,
        ) as claim:
            if claim.acquired:
                self.write_order(claim.lock.transaction, message, order)
                claim.lock.succeed({"written_at": position(message), "by": self.name})
                return Outcome.WRITTEN
        if claim.status is ClaimStatus.COMPLETED:
            return Outcome.DUPLICATE
        if claim.status is ClaimStatus.IN_PROGRESS:
            return Outcome.RETRY
        if claim.status is ClaimStatus.MISMATCH:
            reason = f"order {order.order_id!a} was already written with other content"
        else:  # FAILED for good, or a takeover that was blocked for a person
            reason = f"order {order.order_id!a} failed permanently: {claim.error}"
        return self.dead_letter(message, reason)

    def write_order(self, transaction: Any, message: KafkaMessage, order: Order) -> None:
        """The business write, in the lock's transaction: it commits with the completion."""
        transaction.execute(
            sql.SQL(
                "INSERT INTO {}.orders (order_id, customer, amount_cents, kafka_position, "
                "written_by) VALUES (%s, %s, %s, %s, %s)"
            ).format(self.schema),
            (order.order_id, order.customer, order.amount_cents, position(message), self.name),
        )

    def dead_letter(self, message: KafkaMessage, reason: str) -> Outcome:
        """Keep the record whole with its reason, once per position (a redelivered poison
        record is kept once too), so its offset can move on and nothing is lost."""
        where = position(message)
        with once(
            f"{self.scope}.dead-letters", where, store=self.store, lease_s=self.lease_s
        ) as claim:
            if claim.acquired:
                claim.lock.transaction.execute(
                    sql.SQL(
                        "INSERT INTO {}.order_dead_letters (kafka_position, topic, "
                        "kafka_partition, kafka_offset, record_key, record_value, reason) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)"
                    ).format(self.schema),
                    (
                        where,
                        message.topic(),
                        message.partition(),
                        message.offset(),
                        message.key(),
                        message.value(),
                        reason,
                    ),
                )
                claim.lock.succeed({"reason": reason})
                return Outcome.DEAD_LETTER
        if claim.status is ClaimStatus.COMPLETED:
            return Outcome.DEAD_LETTER  # kept by an earlier delivery
        return Outcome.RETRY
