"""Subprocess entry point: import one consumer, run batches of new records, report peak RSS.

Usage: python -m benchmarks.memory_probe VARIANT BATCHES OUT_JSON, with AWS_ENDPOINT_URL set
to DynamoDB Local and IDEMPOTENCY_TABLE to the variant's table. VARIANT "baseline" only
imports boto3, creates a DynamoDB client and makes one call: the floor both share.
Peak RSS is read from VmHWM (see `peak_kib`).
"""

from __future__ import annotations

import importlib
import json
import resource
import sys
from pathlib import Path

from benchmarks.settings import invocation_context
from benchmarks.sqs_events import new_batch

MODULES = {"layer": "layer_orders", "powertools": "powertools_orders"}


def main(argv: list[str]) -> None:
    variant, batches, out = argv[0], int(argv[1]), Path(argv[2])
    if variant == "baseline":
        import boto3

        boto3.session.Session().client("dynamodb").list_tables()
    else:
        module = importlib.import_module(MODULES[variant])
        for _ in range(batches):
            response = module.handler(new_batch(10), invocation_context())
            if response.get("batchItemFailures"):
                raise SystemExit(f"{variant}: batch reported failures: {response}")
    out.write_text(json.dumps({"variant": variant, "peak_kib": peak_kib()}))


def peak_kib() -> int:
    """This process's peak RSS in KiB.

    Linux's ru_maxrss survives exec, so a child forked from a big parent reports the parent's
    peak; VmHWM belongs to the new address space. ru_maxrss is the fallback elsewhere.
    """
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if __name__ == "__main__":
    main(sys.argv[1:])
