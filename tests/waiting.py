"""Wait for a condition, never for a duration: the bound only turns a hang into a failure.

Bounds are generous (minutes) so that a loaded 2-core machine never fails a test by being
slow; pytest-timeout stops anything that would outlive them anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

BOUND_S = 120.0


def wait_until(
    probe: Callable[[], T | None],
    explain: Callable[[], object],
    *,
    bound_s: float = BOUND_S,
    interval_s: float = 0.05,
) -> T:
    """Call `probe` until it returns something truthy, and return that.

    If it never does within `bound_s`, fail with `explain()` (what the test last saw).
    """
    deadline = time.monotonic() + bound_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"never happened; last seen: {explain()}")
        time.sleep(interval_s)
