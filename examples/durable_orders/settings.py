"""What the dispatcher and the workflow share: the key space of the orders, and the workflow's
lease, read from the environment (a module of its own so the dispatcher does not import the
durable SDK)."""

from __future__ import annotations

import os

SCOPE = "durable-orders"  # the orders' key space in the store, and in the execution names

# A durable lock must be leased for the whole execution, waits included, or another execution
# could take the key over while this one is suspended. Keep it at or above the function's
# DurableConfig executionTimeout (here a day, the example's default).
LEASE_S = float(os.environ.get("ORDER_WORKFLOW_LEASE_S", str(24 * 3600)))

# The pause between steps (a real workflow waits for a warehouse, a settlement window...).
WAIT_S = int(os.environ.get("ORDER_WORKFLOW_WAIT_S", "60"))
