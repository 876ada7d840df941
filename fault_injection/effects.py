"""The side effect under test: one append-only execution log entry per execution.

Every column writes the same log shape (`pk` = the business key, `sk` =
"{scope}#effect#<execution id>", the writer's pid, attempt and fence), so one reader counts
executions per key for all of them; only how the entry is written differs:

* `append_unfenced` is a plain PutItem (`exactly_once.ledger.append_entry`). A holder that dies
  after it and before completion, or that stalls past its lease while another holder takes
  over, leaves a second entry: the idempotency record alone cannot make an effect outside it
  exactly-once.
* `append_fenced` is the layer's `append_effect` (exactly_once/effects.py): one transaction that
  writes the entry and marks the idempotency record, conditioned on the record still being
  held by this lock. A zombie is refused, and a takeover after a crash between effect and
  completion finds the mark and does not apply the effect again. The entry itself is never
  refused (its sort key is new), so the count of entries is the count of executions: a lock
  that let a key run twice would show.
"""

from __future__ import annotations

import os
from typing import Any

from exactly_once import RecordContext
from exactly_once.effects import LeaseLost
from exactly_once.ledger import append_effect, append_entry, execution
from fault_injection import events

__all__ = ["LeaseLost", "append_fenced", "append_unfenced"]

SCOPE = "orders"  # the Orders function's scope: Powertools has none of its own


def _detail(amount: Any, message_id: str) -> dict[str, Any]:
    # The writer's pid lets the accounting tell which fault left an extra item behind.
    return {"kind": "order", "amount": amount, "pid": os.getpid(), "message_id": message_id}


def append_unfenced(
    key: str, fence: int, message_id: str, amount: Any, attempt: int = 0, scope: str = SCOPE
) -> dict[str, Any]:
    detail = {**_detail(amount, message_id), "execution": execution(attempt)}
    entry = append_entry(
        key,
        fence,
        message_id,
        detail,
        table=os.environ["LEDGER_TABLE"],
        sort_prefix=f"{scope}#effect",
    )
    return {"orderId": key, "fence": fence, "ledgerEntry": entry}


def append_fenced(ctx: RecordContext, amount: Any) -> dict[str, Any]:
    """The layer's fenced execution log (`exactly_once.ledger.append_effect`), with the events
    counted."""
    try:
        entry = append_effect(ctx, _detail(amount, ctx.message_id), os.environ["LEDGER_TABLE"])
    except LeaseLost:
        events.record("fence-refused", key=ctx.key, fence=ctx.fence)
        raise
    if entry is None:
        events.record("effect-already-applied", key=ctx.key, fence=ctx.fence)
    return {"orderId": ctx.key, "fence": ctx.fence, "ledgerEntry": entry}
