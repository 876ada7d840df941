"""Peak resident memory of a consumer process (ru_maxrss), one fresh subprocess per variant."""

from __future__ import annotations

import json
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.fresh_python import probe_env, run_python

BASELINE = "baseline"
VARIANT_TABLES = ("layer", "powertools")


@dataclass
class MemoryResult:
    batches: int
    samples: dict[str, list[float]] = field(default_factory=dict)  # MiB

    def median(self, variant: str) -> float:
        return statistics.median(self.samples[variant])

    def over_baseline(self, variant: str) -> float:
        return self.median(variant) - self.median(BASELINE)


def peak_mib(variant: str, batches: int, endpoint: str, table: str) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-mem-") as tmp:
        out = Path(tmp) / "peak.json"
        env = probe_env(AWS_ENDPOINT_URL=endpoint, IDEMPOTENCY_TABLE=table)
        run_python(["-m", "benchmarks.memory_probe", variant, str(batches), str(out)], env)
        return float(json.loads(out.read_text())["peak_kib"]) / 1024


def measure(endpoint: str, tables: dict[str, str], batches: int, runs: int) -> MemoryResult:
    """`tables` maps "layer" and "powertools" to their tables; runs are interleaved."""
    result = MemoryResult(batches, {v: [] for v in (BASELINE, *VARIANT_TABLES)})
    for _ in range(runs):
        for variant in result.samples:
            table = tables.get(variant, "unused")
            result.samples[variant].append(peak_mib(variant, batches, endpoint, table))
    return result
