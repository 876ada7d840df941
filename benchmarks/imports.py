"""Cold-start import cost: each case in a fresh interpreter, interleaved, median of N.

The layer imports boto3 lazily, so importing its consumer module alone flatters it: the first
invocation pays for boto3 anyway. The honest comparison is "consumer module + boto3" against a
bare `import boto3`. Powertools' module imports boto3 and creates its client at import time,
so it is also shown next to "bare boto3 + DynamoDB client".

The built layer is measured apart, as Lambda runs it: the consumer module imported with the
target's interpreter from the folder `layer_build` made, never writing bytecode (/opt is
read-only), once for a source-only build and once for the compiled one. Its interpreter is not
the benchmark's, so those rows are compared with each other only.

The same compiled layer shows what the library's lazy rooms save a queue consumer: its import
beside one that also imports the SNS and HTTP rooms eagerly. Each consumer row is checked to load
nothing from a room it should import lazily (exactly_once/http/, sns/, stores/postgres/), and the
all-rooms row to load the rooms it names, so neither figure can be reported when it is not true.

The plain rows (boto3, the layer from its source tree, Powertools) run with the benchmark's own
interpreter, compiled alike: a first, untimed run of each case writes the bytecode of whatever is
stale (the layer's files change more often than boto3's); then `python -v` checks that every
module each case loads, the layer's, boto3's and the standard library's, comes from a `.pyc`
(the benchmark stops otherwise); and the timed runs write no bytecode (PYTHONDONTWRITEBYTECODE),
so none is compiled while the clock runs, for either side.

Both wall and process CPU time are recorded. Imports are CPU-bound (files come from the page
cache after the first run), so CPU time is what an uncontended cold start pays, and it does not
swell when other processes share the machine; wall time does.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.fresh_python import FUNCTIONS, ROOT, probe_env, run_python
from exactly_once_cdk.bytecode import cache_tag, find_interpreter
from exactly_once_cdk.layer_build import build_layer, layer_dir
from exactly_once_cdk.runtime_target import DEFAULT_TARGET

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
_PY = DEFAULT_TARGET.python_version
LAYER_SOURCE = f"built layer, source only: import consumer module (Python {_PY}, read-only)"
LAYER_COMPILED = f"built layer, compiled: import consumer module (Python {_PY}, read-only)"
LAYER_ALL_ROOMS = (
    f"built layer, compiled: consumer module + the SNS and HTTP rooms, eagerly (Python {_PY}, "
    "read-only)"
)
# Case -> whether its layer is built with bytecode.
LAYER_BUILDS = {LAYER_SOURCE: False, LAYER_COMPILED: True, LAYER_ALL_ROOMS: True}
ALL_CASES = (*CASES, *LAYER_BUILDS)

# The rooms a queue consumer imports only when it uses them (paths in the layer).
LAZY_ROOMS = ("exactly_once/http/", "exactly_once/sns/", "exactly_once/stores/postgres/")
# What the all-rooms case imports on top of the consumer: each entry point's module. The
# PostgreSQL store is left out: it imports psycopg when it is imported (stores/postgres/
# connections.py subclasses psycopg.Connection), and the DynamoDB layer measured here carries no
# psycopg, so a DynamoDB consumer could not load that room even by mistake.
OTHER_ROOMS = ("exactly_once.http.api", "exactly_once.sns.subscriber")
# Case -> what it imports.
LAYER_CODE = {
    LAYER_SOURCE: CASES[LAYER_ONLY],
    LAYER_COMPILED: CASES[LAYER_ONLY],
    LAYER_ALL_ROOMS: "\n".join([CASES[LAYER_ONLY], *(f"import {m}" for m in OTHER_ROOMS)]),
}

_TIMED = """import time
_wall, _cpu = time.perf_counter(), time.process_time()
{code}
print(time.perf_counter() - _wall, time.process_time() - _cpu)
"""


@dataclass
class LayerImportResult:
    """The built layer's consumer import, source only against compiled, side by side."""

    runs: int
    python: str  # the interpreter's version, e.g. "3.13.0"
    modules: dict[str, int]  # case -> modules the import loaded from the layer
    wall: dict[str, list[float]] = field(default_factory=dict)  # seconds
    cpu: dict[str, list[float]] = field(default_factory=dict)
    # case -> the files those modules came from, relative to the layer's python/ folder
    files: dict[str, list[str]] = field(default_factory=dict)

    def median_wall(self, case: str) -> float:
        return statistics.median(self.wall[case])

    def median_cpu(self, case: str) -> float:
        return statistics.median(self.cpu[case])

    def room_modules(self, case: str) -> dict[str, int]:
        """Modules the case loaded from each lazy room (rooms it did not touch left out)."""
        counts = {room: sum(f.startswith(room) for f in self.files[case]) for room in LAZY_ROOMS}
        return {room: n for room, n in counts.items() if n}

    @property
    def has_rooms(self) -> bool:
        """Whether the consumer and the all-rooms import were both measured in this run."""
        return LAYER_COMPILED in self.cpu and LAYER_ALL_ROOMS in self.cpu

    @property
    def rooms_ratio(self) -> float:
        """Consumer / consumer + every other room, compiled layer, CPU time: under 1 is the
        share of the eager import a queue consumer pays."""
        return self.median_cpu(LAYER_COMPILED) / self.median_cpu(LAYER_ALL_ROOMS)

    @property
    def rooms_saving_cpu(self) -> float:
        return self.median_cpu(LAYER_ALL_ROOMS) - self.median_cpu(LAYER_COMPILED)

    @property
    def rooms_saving_wall(self) -> float:
        return self.median_wall(LAYER_ALL_ROOMS) - self.median_wall(LAYER_COMPILED)

    @property
    def rooms_saving_modules(self) -> int:
        return self.modules[LAYER_ALL_ROOMS] - self.modules[LAYER_COMPILED]

    @property
    def ratio(self) -> float:
        """Compiled / source-only, CPU time: under 1 is faster."""
        return self.median_cpu(LAYER_COMPILED) / self.median_cpu(LAYER_SOURCE)

    @property
    def saving_cpu(self) -> float:
        return self.median_cpu(LAYER_SOURCE) - self.median_cpu(LAYER_COMPILED)

    @property
    def saving_wall(self) -> float:
        return self.median_wall(LAYER_SOURCE) - self.median_wall(LAYER_COMPILED)


@dataclass
class ImportResult:
    runs: int
    wall: dict[str, list[float]] = field(default_factory=dict)  # seconds
    cpu: dict[str, list[float]] = field(default_factory=dict)
    layer: LayerImportResult | None = None  # measured when the cases include LAYER_BUILDS
    # case -> the modules it loaded from bytecode, checked before timing (all it loaded)
    compiled: dict[str, int] = field(default_factory=dict)

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
    """(wall, CPU) seconds from the first statement to the last; interpreter start-up excluded.
    No bytecode is written: what the run loads was compiled before (`compiled_modules`)."""
    done = run_python(["-c", _TIMED.format(code=code)], probe_env(PYTHONDONTWRITEBYTECODE="1"))
    wall, cpu = done.split()
    return float(wall), float(cpu)


def loaded_code(verbose: str) -> list[str]:
    """The file each module's code came from, read from `python -v`'s stderr: a `.pyc`, or the
    `.py` it was compiled from there and then."""
    marker = "# code object from "
    return [line[len(marker) :].strip("'") for line in verbose.splitlines() if marker in line]


def compiled_modules(case: str, code: str) -> int:
    """How many modules `code` loads, after checking that every one comes from a `.pyc`:
    otherwise the case would pay for compiling while another reads bytecode."""
    done = subprocess.run(
        [sys.executable, "-v", "-c", code],
        env=probe_env(PYTHONDONTWRITEBYTECODE="1"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{case}: {done.stderr[-2000:]}")
    files = loaded_code(done.stderr)
    source = [f for f in files if not f.endswith(".pyc")]
    if not files or source:
        raise RuntimeError(f"{case}: compiled from source while timed: {source[:5]}")
    return len(files)


def measure(runs: int, cases: tuple[str, ...] = ALL_CASES) -> ImportResult:
    if BARE not in cases:
        raise ValueError("the bare boto3 import is the reference and must be measured")
    plain = tuple(case for case in cases if case in CASES)
    for case in plain:  # warm the file cache and write stale bytecode, as a deployed package has
        run_python(["-c", CASES[case]], probe_env())
    compiled = {case: compiled_modules(case, CASES[case]) for case in plain}
    result = ImportResult(runs, {c: [] for c in plain}, {c: [] for c in plain}, compiled=compiled)
    for _ in range(runs):
        for case in plain:
            wall, cpu = time_import(CASES[case])
            result.wall[case].append(wall)
            result.cpu[case].append(cpu)
    layered = tuple(case for case in cases if case in LAYER_BUILDS)
    if layered:
        result.layer = measure_layer(runs, layered)
    return result


def _layer_env(site: Path) -> dict[str, str]:
    # The function folder first, then the layer, as Lambda orders /var/task and /opt/python;
    # nothing written beside the modules, as on read-only /opt.
    path = f"{FUNCTIONS}:{site}"
    return probe_env(PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1")


def _run_layer(python: str, site: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [python, *args],
        env=_layer_env(site),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"layer probe {args!r} failed: {done.stderr[-2000:]}")
    return done


def layer_files(python: str, site: Path, compiled: bool, code: str) -> list[str]:
    """The files of the modules `code` loads from the layer at `site`, relative to it (`python
    -v` prints "code object from <file>" for each), after checking they all come from `.pyc`
    files (compiled) or all from `.py` files (source only): otherwise the rows would not measure
    what they say."""
    lines = _run_layer(python, site, ["-v", "-c", code]).stderr.splitlines()
    marker = "# code object from "
    loaded = [Path(line[len(marker) :].strip("'")) for line in lines if line.startswith(marker)]
    files = [f.relative_to(site).as_posix() for f in loaded if f.is_relative_to(site)]
    # The interpreter's own tag: the target's, or a test suite's stand-in's (its layer was
    # compiled by that stand-in, exactly_once_cdk.bytecode).
    suffix = f".{cache_tag(python)}.pyc" if compiled else ".py"
    stray = [f for f in files if not f.endswith(suffix)]
    if not files or stray:
        raise RuntimeError(f"layer {site}: expected every module from *{suffix}, got {stray[:5]}")
    return files


def check_rooms(case: str, files: list[str]) -> None:
    """A consumer case must load nothing from a lazy room, and the all-rooms case must load
    each room it imports: raise otherwise, so no lean figure is reported that is not true."""
    if case == LAYER_ALL_ROOMS:
        wanted = [m.rpartition(".")[0].replace(".", "/") + "/" for m in OTHER_ROOMS]
        missing = [room for room in wanted if not any(f.startswith(room) for f in files)]
        if missing:
            raise RuntimeError(f"{case}: loaded nothing from {missing}")
        return
    eager = [f for f in files if f.startswith(LAZY_ROOMS)]
    if eager:
        raise RuntimeError(
            f"{case}: the queue consumer loaded modules from a room it should import lazily: "
            f"{eager[:5]}"
        )


def measure_layer(runs: int, cases: tuple[str, ...] = tuple(LAYER_BUILDS)) -> LayerImportResult:
    """Each case imported from its built layer (built here if stale) with the target's
    interpreter, interleaved, `runs` times each."""
    python = find_interpreter(DEFAULT_TARGET.python_version)
    builds = {
        bytecode: build_layer(ROOT / layer_dir(bytecode=bytecode), bytecode=bytecode) / "python"
        for bytecode in sorted({LAYER_BUILDS[case] for case in cases})
    }
    sites = {case: builds[LAYER_BUILDS[case]] for case in cases}
    version = _run_layer(
        python, sites[cases[0]], ["-c", "import platform; print(platform.python_version())"]
    )
    files = {
        case: layer_files(python, site, LAYER_BUILDS[case], LAYER_CODE[case])
        for case, site in sites.items()
    }
    for case, loaded in files.items():
        check_rooms(case, loaded)
    result = LayerImportResult(
        runs,
        version.stdout.strip(),
        {case: len(loaded) for case, loaded in files.items()},
        {c: [] for c in cases},
        {c: [] for c in cases},
        files,
    )
    code = {case: ["-c", _TIMED.format(code=LAYER_CODE[case])] for case in cases}
    for case in cases:  # warm the file cache
        _run_layer(python, sites[case], code[case])
    for _ in range(runs):
        for case in cases:
            wall, cpu = _run_layer(python, sites[case], code[case]).stdout.split()
            result.wall[case].append(float(wall))
            result.cpu[case].append(float(cpu))
    return result
