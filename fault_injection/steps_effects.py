"""The three steps' effects on DynamoDB, with steps (the pattern) or without (the comparison).

Every step's effect is one entry in the run's append-only execution log, of the orders run's
shape with the step's name (`pk` = the business key, `sk` = "{scope}#{step}#<execution id>",
a new id every time), so nothing in an entry refuses a second one and the entries per
(key, step) count the executions of that step that took effect:

* `fenced_steps`: each step is a `ctx.step(name, fn)`; `fn` calls the outside world
  (`provider_call`, with `step.idempotency_key`) and hands its log entry to `step.put`, which
  commits it in the same TransactWriteItems as the step's recovery point, fenced on the lock.
  A crash between steps resumes after the last point; a crash inside a step commits nothing of
  it; a zombie's point (and entry) is refused.
* `plain_steps`: the same three entries as plain PutItems (`exactly_once.ledger.append_entry`)
  under the same idempotency record: what the record alone does for work in steps.

`provider_call` stands for a payment API: a plain PutItem of its own kind of entry, carrying
the idempotency key it was called with. A provider that deduplicates on that key acts once
for every call that carries the same key, so the books check that every call a (key, step)
made carried one key (a second key would be a second charge).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from exactly_once import RecordContext, clients
from exactly_once.effects import LeaseLost
from exactly_once.ledger import append_entry, execution
from exactly_once.steps.step import Step
from fault_injection import events, injection
from fault_injection.steps_workload import AFTER, INSIDE, STEPS

STEP = "step"  # an entry's detail "kind": a step's effect
PROVIDER = "provider-call"  # an entry's detail "kind": a call to the outside world
At = Callable[[str], None]  # fires the body's fault planned at a point


def detail_of(ctx: RecordContext, kind: str, step: str, amount: Any) -> dict[str, Any]:
    # The writer's pid lets the accounting tell which fault left an extra entry behind.
    return {
        "kind": kind,
        "step": step,
        "amount": amount,
        "scope": ctx.scope,
        "pid": os.getpid(),
        "message_id": ctx.message_id,
        "execution": execution(ctx.attempt),
    }


def _item(ctx: RecordContext, sort_key: str, detail: dict[str, Any]) -> dict[str, Any]:
    return {
        "pk": {"S": ctx.key},
        "sk": {"S": sort_key},
        "fence": {"N": str(ctx.fence)},
        "message_id": {"S": ctx.message_id},
        "detail": {"S": json.dumps(detail, default=str, sort_keys=True)},
        "written_at_ms": {"N": str(int(time.time() * 1000))},
    }


def provider_call(ctx: RecordContext, step: str, idempotency_key: str, amount: Any) -> None:
    """The outside world's side of a step: it received a call with `idempotency_key`."""
    detail = {**detail_of(ctx, PROVIDER, step, amount), "idempotency_key": idempotency_key}
    item = _item(ctx, f"{ctx.scope}#{PROVIDER}#{step}#{uuid.uuid4().hex}", detail)
    clients.dynamodb().put_item(TableName=os.environ["LEDGER_TABLE"], Item=item)


def put_in_step(ctx: RecordContext, step: Step, detail: dict[str, Any]) -> None:
    """DynamoDB: the entry goes in the TransactWriteItems that writes the step's point."""
    item = _item(ctx, f"{ctx.scope}#{step.name}#{uuid.uuid4().hex}", detail)
    step.put(os.environ["LEDGER_TABLE"], item)


def fenced_steps(
    ctx: RecordContext,
    amount: Any,
    at: At,
    write: Callable[[RecordContext, Step, dict[str, Any]], None] = put_in_step,
    call_out: Callable[[RecordContext, str, str, Any], None] = provider_call,
) -> dict[str, Any]:
    """charge, ship, email: each a step whose log entry (`write`) commits with its recovery
    point, after its call to the outside world (`call_out`) with the step's key."""
    results: dict[str, Any] = {}
    for name in STEPS:
        ran: list[bool] = []

        def fn(step: Step, name: str = name, ran: list[bool] = ran) -> dict[str, Any]:
            ran.append(True)
            call_out(ctx, name, step.idempotency_key, amount)
            detail = {**detail_of(ctx, STEP, name, amount), "idempotency_key": step.idempotency_key}
            write(ctx, step, detail)
            if name in INSIDE:
                at(INSIDE[name])  # called out, its point not written
            return {"step": name, "fence": step.fence}

        try:
            results[name] = ctx.step(name, fn)
        except LeaseLost:
            events.record("step-refused", key=ctx.key, step=name, fence=ctx.fence)
            raise
        if not ran:
            events.record("step-resumed", key=ctx.key, step=name, fence=ctx.fence)
        if name in AFTER:
            at(AFTER[name])
    return {"orderId": ctx.key, "fence": ctx.fence, "steps": results}


def plain_steps(ctx: RecordContext, amount: Any, at: At) -> dict[str, Any]:
    """The same three entries as plain PutItems: a retry runs every step again."""
    table = os.environ["LEDGER_TABLE"]
    results: dict[str, Any] = {}
    for name in STEPS:
        detail = detail_of(ctx, STEP, name, amount)
        results[name] = append_entry(
            ctx.key, ctx.fence, ctx.message_id, detail, table, sort_prefix=f"{ctx.scope}#{name}"
        )
        if name in INSIDE:
            at(INSIDE[name])  # the plain step has no point: the same place, after its effect
        if name in AFTER:
            at(AFTER[name])
    return {"orderId": ctx.key, "fence": ctx.fence, "steps": results}


def at_points(body: Any, key: str, receive_count: int) -> At:
    """Fire `body`'s planned crash or pause at a point (injection.at_point, bound)."""
    return lambda point: injection.at_point(body, point, key, receive_count)
