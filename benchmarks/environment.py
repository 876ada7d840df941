"""What the numbers were measured on: machine, versions, date and the injected latency."""

from __future__ import annotations

import datetime as dt
import os
import platform
from importlib import metadata
from pathlib import Path

from benchmarks.settings import Settings
from benchmarks.stores import StoreResults
from local_aws.node_tools import find_dynamodb_local


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe(settings: Settings) -> dict[str, str]:
    return {
        "Date (UTC)": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "Machine": (
            f"{_cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
        ),
        "Python": platform.python_version(),
        "boto3 / botocore": f"{metadata.version('boto3')} / {metadata.version('botocore')}",
        "aws-lambda-powertools": metadata.version("aws-lambda-powertools"),
        "DynamoDB Local": (
            f"{find_dynamodb_local().name.removeprefix('dynamodb_local_')} (in-memory, loopback)"
        ),
        "Injected latency": (
            f"{settings.latency_ms:g} ms per DynamoDB/SQS request (botocore before-send sleep)"
        ),
        "I/O-bound record": f"business function sleeps {settings.io_ms:g} ms",
        "Run": settings.name,
    }


def describe_postgres(result: StoreResults, settings: Settings) -> dict[str, str]:
    """The Setup rows of the store comparison."""
    trips = result.local_round_trip_s
    return {
        "PostgreSQL": (
            f"{result.server_version} (local server, fsync off, loopback), "
            f"psycopg {metadata.version('psycopg')}"
        ),
        "Injected latency, PostgreSQL": (
            f"{settings.latency_ms:g} ms per round trip (a sleep in the counting proxy, "
            "once per client flight)"
        ),
        "PostgreSQL round trip (warm, no injected latency)": (
            f"{trips['direct'] * 1000:.2f} ms direct, {trips['through the proxy'] * 1000:.2f} ms "
            "through the counting proxy (medians of SELECT 1)"
        ),
    }
