"""One saturating "execution environment" of the throughput row (benchmarks/throughput.py).

`python -m benchmarks.throughput_worker SPEC` (SPEC a JSON object, see `Spec`): builds its
consumer, runs its warm-up batches, prints "ready", waits for a line on stdin, then runs its
batches of new records back to back and prints one JSON line: records run, failures, CPU
seconds. A separate process, as each Lambda execution environment is, so the consumers are not
held to one interpreter's GIL and the row measures what the machine can do.

The layer logs a line and an EMF document per batch on stdout: those go to /dev/null (still
produced, so still paid for), and the protocol lines to the stdout the parent reads.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, TextIO

WARMUP_BATCHES = 3  # clients, connection pools, DynamoDB Local's request paths


@dataclass(frozen=True)
class Spec:
    arm: str  # a throughput.Arm value
    dynamodb_endpoint: str
    sqs_endpoint: str
    run_id: str  # the rig's: its table names and scope
    dsn: str  # the PostgreSQL server (direct, no proxy), for the layer on PostgreSQL
    batches: int
    batch: int = 10


@dataclass(frozen=True)
class Done:
    records: int
    failures: int
    runs: int  # the business function's runs: one per new record
    cpu_s: float  # this process's CPU time over the timed batches


def _consumer(spec: Spec, work: Any) -> Any:
    from benchmarks.rig import Rig, Variant
    from benchmarks.throughput import Arm

    rig = Rig(spec.dynamodb_endpoint, spec.sqs_endpoint, 0.0, run_id=spec.run_id)
    if spec.arm == Arm.POWERTOOLS:
        return rig.consumer(Variant.POWERTOOLS, work, latency=False)
    if spec.arm == Arm.LAYER_DYNAMODB:
        return rig.consumer(Variant.LAYER, work, latency=False)
    from exactly_once import sqs_consumer

    def handle(body: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return dict(work(body))

    wrap = sqs_consumer(
        key="orderId",
        dsn=spec.dsn,
        scope=f"{rig.scope}-throughput",
        sqs_client=rig.client("sqs", latency=False),
    )
    return wrap(handle)


def _run(consumer: Any, spec: Spec, batches: int) -> int:
    """Failed records over `batches` batches of new records."""
    from benchmarks.settings import invocation_context
    from benchmarks.sqs_events import new_batch

    failures = 0
    for _ in range(batches):
        response = consumer(new_batch(spec.batch), invocation_context())
        failures += len(response.get("batchItemFailures", []))
    return failures


def main(spec: Spec, protocol: TextIO) -> None:
    from benchmarks.calls import CountingWork

    work = CountingWork()
    consumer = _consumer(spec, work)
    failures = _run(consumer, spec, WARMUP_BATCHES)
    warm_runs = work.runs
    print("ready", file=protocol, flush=True)
    sys.stdin.readline()
    started = time.process_time()
    failures += _run(consumer, spec, spec.batches)
    cpu = time.process_time() - started
    done = Done(spec.batches * spec.batch, failures, work.runs - warm_runs, cpu)
    print(json.dumps(asdict(done)), file=protocol, flush=True)


if __name__ == "__main__":
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the process's lifetime
    main(Spec(**json.loads(sys.argv[1])), out)
