"""Records per second at saturation: the layer on DynamoDB Local, the layer on PostgreSQL, and
Powertools on DynamoDB Local, each on its own, over the same number of new records.

Saturation here: several worker processes (benchmarks/throughput_worker.py, one "execution
environment" each) run batches of 10 new, CPU-trivial records back to back, without the
injected latency, so nothing waits but the machine. They build their consumers and warm up
first, then all start at once; the rate is the records over the time until the last one is done.
The whole machine's busy CPU time over that window (/proc/stat) is recorded beside it: the
client processes and the store share the cores, so records per busy CPU-second is the figure
that can be set against another system's per-core rate, with care (see the report).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from benchmarks.errors import BenchmarkInvalid
from benchmarks.fresh_python import ROOT
from benchmarks.rig import Rig
from benchmarks.throughput_worker import Done, Spec

BATCH = 10
START_TIMEOUT_S = 120.0


class Arm(StrEnum):
    LAYER_DYNAMODB = "layer on DynamoDB Local"
    LAYER_POSTGRES = "layer on PostgreSQL"
    POWERTOOLS = "Powertools on DynamoDB Local"


ARMS = (Arm.LAYER_DYNAMODB, Arm.LAYER_POSTGRES, Arm.POWERTOOLS)


@dataclass(frozen=True)
class ThroughputRow:
    arm: Arm
    records: int
    processes: int
    seconds: float  # from "go" until the last worker is done
    client_cpu_s: float  # the workers' CPU time, summed
    machine_cpu_s: float | None  # every process's busy CPU time on the machine (Linux only)

    @property
    def rate(self) -> float:
        """Records per second."""
        return self.records / self.seconds

    @property
    def per_cpu_second(self) -> float | None:
        """Records per busy CPU-second of the whole machine (client and store together)."""
        if not self.machine_cpu_s:
            return None
        return self.records / self.machine_cpu_s


@dataclass(frozen=True)
class ThroughputResult:
    cores: int
    rows: list[ThroughputRow]

    def row(self, arm: Arm) -> ThroughputRow:
        for found in self.rows:
            if found.arm is arm:
                return found
        raise KeyError(arm)


def busy_cpu_s(stat: str | None = None) -> float | None:
    """Busy CPU seconds of all cores since boot, from /proc/stat's first line (user, nice,
    system, irq, softirq, steal; idle and iowait left out); None where there is no /proc."""
    if stat is None:
        try:
            stat = Path("/proc/stat").read_text()
        except OSError:
            return None
    fields = [int(v) for v in stat.splitlines()[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def shares(batches: int, processes: int) -> list[int]:
    """`batches` split as evenly as can be over `processes` (none left empty)."""
    processes = max(1, min(processes, batches))
    base, extra = divmod(batches, processes)
    return [base + (1 if i < extra else 0) for i in range(processes)]


def run_arm(spec: Spec, processes: int) -> ThroughputRow:
    """`spec.batches` batches over `processes` workers, started together."""
    workers: list[tuple[subprocess.Popen[str], Path]] = []
    try:
        for batches in shares(spec.batches, processes):
            log = Path(tempfile.mkstemp(prefix="bench-throughput-", suffix=".log")[1])
            worker_spec = json.dumps(asdict(Spec(**{**asdict(spec), "batches": batches})))
            with log.open("w") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "benchmarks.throughput_worker", worker_spec],
                    cwd=ROOT,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    text=True,
                )
            workers.append((proc, log))
        for proc, log in workers:
            _expect(proc, log, "ready")
        machine_before, started = busy_cpu_s(), time.perf_counter()
        for proc, _ in workers:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        done = [Done(**json.loads(_expect(proc, log, "{"))) for proc, log in workers]
        seconds, machine_after = time.perf_counter() - started, busy_cpu_s()
    finally:
        for proc, log in workers:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            log.unlink(missing_ok=True)
    records = sum(d.records for d in done)
    failures, runs = sum(d.failures for d in done), sum(d.runs for d in done)
    if failures or runs != records:
        raise BenchmarkInvalid(f"{spec.arm}: {failures} failed records, {runs} runs of {records}")
    machine = (
        None if machine_before is None or machine_after is None else machine_after - machine_before
    )
    return ThroughputRow(
        Arm(spec.arm), records, len(workers), seconds, sum(d.cpu_s for d in done), machine
    )


def _expect(proc: subprocess.Popen[str], log: Path, start: str) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(start):
        proc.kill()
        proc.wait()
        raise BenchmarkInvalid(
            f"a throughput worker said {line!r} instead of {start!r}: {log.read_text()[-2000:]}"
        )
    return line


def measure(rig: Rig, postgres_dsn: str | None, records: int, processes: int) -> ThroughputResult:
    """Each arm in turn (PostgreSQL only when a server is given), `records` new records each."""
    rows = []
    for arm in ARMS:
        if arm is Arm.LAYER_POSTGRES and postgres_dsn is None:
            continue
        spec = Spec(
            arm=arm.value,
            dynamodb_endpoint=rig.dynamodb_endpoint,
            sqs_endpoint=rig.sqs_endpoint,
            run_id=rig.run_id,
            dsn=postgres_dsn or "",
            batches=max(1, records // BATCH),
            batch=BATCH,
        )
        rows.append(run_arm(spec, processes))
    return ThroughputResult(os.cpu_count() or 1, rows)
