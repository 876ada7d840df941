"""The machine's load around a run, and where the report may go because of it.

Other work on the machine inflates wall times and skews ratios, so `make bench` only overwrites
the committed report (docs/benchmarks.md and .png) when the 1-minute load average was at most
MAX_LOAD both when the measurements started and when they ended. Otherwise it writes
benchmarks.loaded.md and .png beside it, says so, and exits non-zero: run it again later.

The bench itself keeps about one process runnable, which holds the 1-minute average near 1 on
its own. So both readings are taken with the bench's servers stopped, after waiting (up to the
settings' `load_settle_s`) for the average to fall to MAX_LOAD: it decays by e^(-t/60 s) once
nothing runs, so the bench's own share fades in seconds, while other work that keeps a core busy
holds it above 1 however long one waits.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_LOAD = 1.0
POLL_S = 5.0  # the kernel recomputes the averages every 5 seconds
DECAY_S = 60.0  # the 1-minute average's time constant


def one_minute() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def settled(
    wait_s: float,
    read: Callable[[], float | None] = one_minute,
    sleep: Callable[[float], object] = time.sleep,
) -> float | None:
    """The 1-minute load average once it is at most MAX_LOAD, or as it is after `wait_s`.

    It stops waiting as soon as the average could not reach MAX_LOAD in the time left even were
    nothing to run from now on (it falls by e^(-t/60 s) at the fastest): a loaded machine is
    reported as such without waiting for nothing."""
    load, left = read(), wait_s
    while (
        load is not None
        and load > MAX_LOAD
        and left > 0
        and load * math.exp(-left / DECAY_S) <= MAX_LOAD
    ):
        sleep(POLL_S)
        left -= POLL_S
        load = read()
    return load


@dataclass(frozen=True)
class Load:
    start: float | None
    end: float | None

    @property
    def quiet(self) -> bool:
        """Both readings known and at most MAX_LOAD (an unknown load is not a quiet one)."""
        return all(v is not None and v <= MAX_LOAD for v in (self.start, self.end))

    def describe(self) -> str:
        def show(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.2f}"

        return f"{show(self.start)} / {show(self.end)}"


@dataclass(frozen=True)
class Destination:
    report: Path
    chart: Path
    refused: bool  # the committed report was left alone because the machine was loaded

    def notice(self, load: Load) -> str:
        if not self.refused:
            return f"wrote {self.report} and {self.chart}"
        return (
            f"the 1-minute load average was {load.describe()} (start / end), above "
            f"{MAX_LOAD:g}: left {self.report.with_name('benchmarks.md')} as it is and wrote "
            f"{self.report} and {self.chart} instead; run it again on a quiet machine"
        )


def destination(out: Path, load: Load) -> Destination:
    """Where the report and chart go: the usual names when the machine was quiet, else the
    .loaded ones beside them."""
    if load.quiet:
        return Destination(out / "benchmarks.md", out / "benchmarks.png", refused=False)
    return Destination(out / "benchmarks.loaded.md", out / "benchmarks.loaded.png", refused=True)
