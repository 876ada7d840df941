"""The orders consumer on a Kinesis stream: the library's `stream_consumer`, its execution log
fenced (the pattern) or plain (the baseline), and one self-test of the order verdict.

Each log entry carries where its record sat (shard, sequence number) and when the effect was
written (`t_ns`, taken just before the write: a shard's records run one after another, so a
later record's write starts after an earlier one's has returned), so the books can check a
shard's effects against its sequence order as well as count executions per key.

A record has no receive count on a stream (and with the lock off every delivery starts its own
record at attempt 1), so the planned transient failures are counted in the run's event
directory instead: a body with `failTimes` N fails its first N runs, whoever runs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

from exactly_once import RecordContext
from exactly_once.effects import LeaseLost
from exactly_once.ledger import append_effect, append_entry, execution
from exactly_once.streams import stream_consumer
from fault_injection import events
from fault_injection.business import process_order
from fault_injection.injection import InjectedTransientError

SCOPE = "orders"


def where(ctx: RecordContext) -> dict[str, Any]:
    """The record's shard and sequence number, the writer and the time of the write."""
    event_id = str(ctx.record.get("eventID", ""))
    return {
        "shard": event_id.split(":", 1)[0],
        "sequence": ctx.message_id,
        "pid": os.getpid(),
        "t_ns": time.time_ns(),
    }


def fail_early(body: Any, key: str | None) -> None:
    """Raise on the first `failTimes` runs of this body (counted across processes)."""
    fail_times = body.get("failTimes", 0) if isinstance(body, dict) else 0
    directory = os.environ.get(events.EVENT_DIR_ENV)
    if not isinstance(fail_times, int) or fail_times <= 0 or not directory:
        return
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20]
    for run in range(1, fail_times + 1):
        marker = os.path.join(directory, f"failed-{digest}-{run}")
        try:
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            continue
        events.record("transient", key=key, run=run)
        raise InjectedTransientError(f"injected transient failure, run {run} of {fail_times}")


def _run(body: Any, ctx: RecordContext, effect: Any) -> dict[str, Any]:
    fail_early(body, ctx.key)
    # A receive count no failTimes reaches: process_order's own transient check stays quiet
    # (fail_early counted the runs); its crash and pause points fire once per body regardless.
    return process_order(body, ctx.key, 1 << 30, effect)


def _fenced(ctx: RecordContext, amount: Any) -> dict[str, Any]:
    detail = {"kind": "order", "amount": amount, **where(ctx)}
    try:
        entry = append_effect(ctx, detail, os.environ["LEDGER_TABLE"])
    except LeaseLost:
        events.record("fence-refused", key=ctx.key, fence=ctx.fence)
        raise
    if entry is None:
        events.record("effect-already-applied", key=ctx.key, fence=ctx.fence)
    return {"orderId": ctx.key, "fence": ctx.fence}


def _plain(ctx: RecordContext, amount: Any) -> dict[str, Any]:
    detail = {"kind": "order", "amount": amount, **where(ctx), "execution": execution(ctx.attempt)}
    append_entry(
        ctx.key,
        ctx.fence,
        ctx.message_id,
        detail,
        table=os.environ["LEDGER_TABLE"],
        sort_prefix=f"{ctx.scope or SCOPE}#effect",
    )
    return {"orderId": ctx.key, "fence": ctx.fence}


@stream_consumer(key="orderId")
def handle_fenced(payload: Any, ctx: RecordContext) -> dict[str, Any]:
    return _run(payload, ctx, lambda amount: _fenced(ctx, amount))


@stream_consumer(key="orderId")
def handle_unfenced(payload: Any, ctx: RecordContext) -> dict[str, Any]:
    return _run(payload, ctx, lambda amount: _plain(ctx, amount))


class _Reversed:
    """A self-test of the order verdict, not a consumer anyone should write: the fenced
    consumer handed each batch in reverse, so a shard's later records run first."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def last_results(self) -> Any:
        return getattr(self.inner, "last_results", None)

    def __call__(self, event: Any, context: Any = None) -> Any:
        records = event.get("Records") if isinstance(event, dict) else None
        if isinstance(records, list):
            event = {**event, "Records": list(reversed(records))}
        return self.inner(event, context)


handle_reversed = _Reversed(handle_fenced)
