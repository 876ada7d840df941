"""The three-step consumer on the PostgreSQL store: each step an atomic phase.

Each step's log entry is an INSERT into `exactly_once.ledger` on `step.transaction`, which
commits in one round trip with the step's recovery point, fenced on the lock (or rolls back
with it). Its call to the outside world is a row of its own on a separate autocommit
connection (the provider's side, which no rollback undoes), carrying the step's key.

The store's pools meet the run's faults as the orders consumer's do (consumer_postgres), and
a step's commit meets them at the completion's rates: dropped before it is sent, or applied
with its reply lost, which the store settles by reading the row.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from typing import Any

import psycopg

from exactly_once import RecordContext
from exactly_once.steps.step import Step
from exactly_once.stores.codec import sanitise
from exactly_once.stores.postgres.ids import db_key
from fault_injection.business import process_order
from fault_injection.consumer_postgres import FaultyPostgresConsumer
from fault_injection.injection import receive_count
from fault_injection.pg_faults import Decide
from fault_injection.steps_effects import PROVIDER, at_points, detail_of, fenced_steps

_INSERT = (
    "INSERT INTO exactly_once.ledger (pk, sk, fence, message_id, detail, written_at_ms) "
    "VALUES (%s, %s, %s, %s, %s, %s)"
)
_outside: dict[int, psycopg.Connection[Any]] = {}  # the provider's connection, per process
_outside_lock = threading.Lock()


def _row(ctx: RecordContext, sort_key: str, detail: dict[str, Any]) -> tuple[Any, ...]:
    return (
        db_key(ctx.key),
        sort_key,
        ctx.fence,
        sanitise(ctx.message_id),
        json.dumps(detail, default=str, sort_keys=True),
        int(time.time() * 1000),
    )


def insert_in_step(ctx: RecordContext, step: Step, detail: dict[str, Any]) -> None:
    """The entry, in the step's transaction: it commits with the step's point or not at all."""
    sort_key = f"{ctx.scope}#{step.name}#{uuid.uuid4().hex}"
    step.transaction.execute(_INSERT, _row(ctx, sort_key, detail))


def provider_call(ctx: RecordContext, step: str, idempotency_key: str, amount: Any) -> None:
    """The outside world received a call with `idempotency_key` (autocommit: no rollback)."""
    detail = {**detail_of(ctx, PROVIDER, step, amount), "idempotency_key": idempotency_key}
    row = _row(ctx, f"{ctx.scope}#{PROVIDER}#{step}#{uuid.uuid4().hex}", detail)
    with _outside_lock:
        conn = _outside.get(os.getpid())
        if conn is None or conn.closed:
            conn = _outside[os.getpid()] = psycopg.connect(
                os.environ["IDEMPOTENCY_DSN"], autocommit=True
            )
        conn.execute(_INSERT, row)


class FaultyStepsConsumer(FaultyPostgresConsumer):
    """The PostgreSQL consumer whose steps' commits meet the completion's faults."""

    @property
    def decide(self) -> Decide:
        return self._decide

    @decide.setter
    def decide(self, decide: Decide) -> None:
        self._decide: Decide = lambda kind: decide("complete" if kind == "step" else kind)


def _handle(body: Any, ctx: RecordContext) -> dict[str, Any]:
    at = at_points(body, ctx.key, receive_count(ctx.record))
    return process_order(
        body,
        ctx.key,
        receive_count(ctx.record),
        lambda amount: fenced_steps(ctx, amount, at, insert_in_step, provider_call),
    )


handle = FaultyStepsConsumer(_handle)
