"""Cold-start import cost: each case in a fresh interpreter, interleaved, median of N.

The layer imports boto3 lazily, so importing its consumer module alone flatters it: the first
invocation pays for boto3 anyway. The honest comparison is "consumer module + boto3" against a
bare `import boto3`. Powertools' module imports boto3 and creates its client at import time,
so it is also shown next to "bare boto3 + DynamoDB client".

Both wall and process CPU time are recorded. Imports are CPU-bound (files come from the page
cache after the first run), so CPU time is what an uncontended cold start pays, and it does not
swell when other processes share the machine; wall time does.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from benchmarks.fresh_python import probe_env, run_python

BARE = "bare: import boto3"
BARE_CLIENT = "bare: import boto3 + create a DynamoDB client"
LAYER_ONLY = "layer: import consumer module (boto3 not yet imported)"
LAYER = "layer: import consumer module + import boto3"
LAYER_CLIENT = "layer: consumer module + boto3 + its DynamoDB client (first call)"
POWERTOOLS = "Powertools: import consumer module (imports boto3, creates its client)"

CASES = {
    BARE: "import boto3",
    BARE_CLIENT: "import boto3\nboto3.session.Session().client('dynamodb')",
    LAYER_ONLY: "import layer_orders",
    LAYER: "import layer_orders\nimport boto3",
    LAYER_CLIENT: "import layer_orders\nfrom exactly_once import clients\nclients.dynamodb()",
    POWERTOOLS: "import powertools_orders",
}
ALL_CASES = tuple(CASES)

_TIMED = """import time
_wall, _cpu = time.perf_counter(), time.process_time()
{code}
print(time.perf_counter() - _wall, time.process_time() - _cpu)
"""


@dataclass
class ImportResult:
    runs: int
    wall: dict[str, list[float]] = field(default_factory=dict)  # seconds
    cpu: dict[str, list[float]] = field(default_factory=dict)

    @property
    def cases(self) -> list[str]:
        return list(self.wall)

    def median_wall(self, case: str) -> float:
        return statistics.median(self.wall[case])

    def median_cpu(self, case: str) -> float:
        return statistics.median(self.cpu[case])

    def fastest_wall(self, case: str) -> float:
        """The least-disturbed run: closest to an idle machine's cold start."""
        return min(self.wall[case])

    def wall_over_bare(self, case: str) -> float:
        return self.median_wall(case) - self.median_wall(BARE)

    def cpu_over_bare(self, case: str) -> float:
        return self.median_cpu(case) - self.median_cpu(BARE)


def time_import(code: str) -> tuple[float, float]:
    """(wall, CPU) seconds from the first statement to the last; interpreter start-up excluded."""
    wall, cpu = run_python(["-c", _TIMED.format(code=code)], probe_env()).split()
    return float(wall), float(cpu)


def measure(runs: int, cases: tuple[str, ...] = ALL_CASES) -> ImportResult:
    if BARE not in cases:
        raise ValueError("the bare boto3 import is the reference and must be measured")
    for case in cases:
        time_import(
            CASES[case]
        )  # warm the file cache and write bytecode, as a deployed package has
    result = ImportResult(runs, {c: [] for c in cases}, {c: [] for c in cases})
    for _ in range(runs):
        for case in cases:
            wall, cpu = time_import(CASES[case])
            result.wall[case].append(wall)
            result.cpu[case].append(cpu)
    return result
