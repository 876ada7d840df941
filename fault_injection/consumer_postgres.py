"""The orders consumer on the PostgreSQL store, its effect written in the holder's transaction.

The effect is the layer's execution log, `exactly_once.ledger.append_effect`: on PostgreSQL a
plain INSERT whose sort key is new for every execution ("{scope}#effect#<execution id>"), so
nothing in the row itself refuses a second one. It goes in `ctx.transaction`, which commits
with the fenced COMPLETED update or not at all: only that transaction keeps the effects at one
per key, and the run measures exactly that.

The store's pool is wrapped in `FaultyPool`, so its statements meet the run's connection drops
and lost replies. The decorator opens its store from the configuration and offers no way to
hand it one, so this consumer builds its processor itself, the way `RecordEntry.processor`
does, with the store on the faulty pool.
"""

from __future__ import annotations

import os
from typing import Any

from exactly_once import RecordContext
from exactly_once.errors import ConfigurationError
from exactly_once.ledger import append_effect
from exactly_once.sqs.config import ConsumerConfig
from exactly_once.sqs.consumer import SqsConsumer
from exactly_once.sqs.processor import RecordProcessor
from exactly_once.stores.postgres.store import PostgresStore
from fault_injection import events
from fault_injection.business import process_order
from fault_injection.injection import receive_count
from fault_injection.pg_faults import Decide, faulty_store_pools
from fault_injection.pg_policy import no_faults


def append_in_transaction(ctx: RecordContext, amount: Any) -> dict[str, Any]:
    # The writer's pid lets the accounting tell which fault left an extra row behind.
    detail = {"kind": "order", "amount": amount, "pid": os.getpid(), "message_id": ctx.message_id}
    entry = append_effect(ctx, detail)
    return {"orderId": ctx.key, "fence": ctx.fence, "ledgerEntry": entry}


def _record_fault(kind: str, fault: str) -> None:
    events.record("pg-fault", op=kind, fault=fault)


class FaultyPostgresConsumer(SqsConsumer):
    """`@sqs_consumer(key="orderId")` on IDEMPOTENCY_DSN, its pool meeting `decide`'s faults."""

    def __init__(self, handler: Any, decide: Decide = no_faults) -> None:
        super().__init__(handler, "orderId", {})
        self.decide = decide

    def processor(self) -> RecordProcessor:
        config = ConsumerConfig.resolve(self.overrides, self.scope_variable)
        with self._lock:
            if self._processor is None or self._processor.config != config:
                if not config.dsn or config.table_name:
                    raise ConfigurationError("this consumer needs IDEMPOTENCY_DSN and no table")
                pools = faulty_store_pools(
                    config.dsn, lambda kind: self.decide(kind), _record_fault
                )
                store = PostgresStore(
                    config.dsn,
                    record_ttl_s=config.record_ttl_s,
                    failed_ttl_s=config.failed_ttl_s,
                    result_cap_bytes=config.result_cap_bytes,
                    **pools,
                )
                self._processor = RecordProcessor(
                    self.handler, self.key, config, store, self._sqs_client
                )
            return self._processor


def _handle(body: Any, ctx: RecordContext) -> dict[str, Any]:
    return process_order(
        body,
        ctx.key,
        receive_count(ctx.record),
        lambda amount: append_in_transaction(ctx, amount),
    )


handle = FaultyPostgresConsumer(_handle)
