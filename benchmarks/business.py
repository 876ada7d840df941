"""The business function both consumers run: optional simulated I/O, then a small result."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Work = Callable[[dict[str, Any]], dict[str, Any]]


def make_work(io_s: float) -> Work:
    """`io_s` > 0 models an I/O-bound record (a downstream call); 0 is a CPU-trivial one."""

    def work(order: dict[str, Any]) -> dict[str, Any]:
        if io_s > 0:
            time.sleep(io_s)
        return {"orderId": order["orderId"], "accepted": True}

    return work
