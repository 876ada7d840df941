"""Fresh interpreters for cold-start and memory probes, with a controlled environment.

Only what a Lambda runtime would set is passed on: the layer and function folders on the path,
a region, dummy credentials, the consumer's variables. Nothing from the developer's shell.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYER = ROOT / "layers" / "shared" / "python"
FUNCTIONS = ROOT / "benchmarks" / "lambdas"


def probe_env(**extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        # The function folder first, then the layer, as Lambda orders /var/task and /opt/python.
        "PYTHONPATH": os.pathsep.join([str(FUNCTIONS), str(LAYER), str(ROOT)]),
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
        "IDEMPOTENCY_TABLE": "bench-orders",
        "CONSUMER_SCOPE": "bench-orders",
        "POWERTOOLS_SERVICE_NAME": "bench-orders",
        **extra,
    }


def run_python(args: list[str], env: dict[str, str], timeout_s: float = 120.0) -> str:
    """Run `python <args>` in a new process and return its stdout; raise if it fails."""
    done = subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"probe {args!r} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout
