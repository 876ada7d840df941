"""The side effect under test: one append-only ledger item per execution.

Two ways to write it:

* `append_unfenced` is what the example consumers do (`exactly_once.ledger.append_entry`): a
  plain PutItem. A holder that dies after it and before completion, or that stalls past its
  lease while another holder takes over, leaves a second item: the idempotency record alone
  cannot make an effect outside it exactly-once.
* `append_fenced` is the layer's `record_effect` (exactly_once/effects.py): one transaction that
  writes the ledger item and marks the idempotency record, conditioned on the record still
  being held by this lock. A zombie is refused, and a takeover after a crash between effect and
  completion finds the mark and does not apply the effect again.
"""

from __future__ import annotations

import os
from typing import Any

from exactly_once import RecordContext
from exactly_once.effects import LeaseLost
from exactly_once.ledger import append_entry, record_effect
from fault_injection import events

__all__ = ["LeaseLost", "append_fenced", "append_unfenced"]


def _detail(amount: Any, message_id: str) -> dict[str, Any]:
    # The writer's pid lets the accounting tell which fault left an extra item behind.
    return {"kind": "order", "amount": amount, "pid": os.getpid(), "message_id": message_id}


def append_unfenced(key: str, fence: int, message_id: str, amount: Any) -> dict[str, Any]:
    entry = append_entry(
        key, fence, message_id, _detail(amount, message_id), table=os.environ["LEDGER_TABLE"]
    )
    return {"orderId": key, "fence": fence, "ledgerEntry": entry}


def append_fenced(ctx: RecordContext, amount: Any) -> dict[str, Any]:
    """The layer's fenced effect (`exactly_once.ledger.record_effect`), with the events counted."""
    try:
        entry = record_effect(ctx, _detail(amount, ctx.message_id), os.environ["LEDGER_TABLE"])
    except LeaseLost:
        events.record("fence-refused", key=ctx.key, fence=ctx.fence)
        raise
    if entry is None:
        events.record("effect-already-applied", key=ctx.key, fence=ctx.fence)
    return {"orderId": ctx.key, "fence": ctx.fence, "ledgerEntry": entry}
