"""`eonce status` shows each function's worker health as `up` publishes it (issue 26, defect 3):
running, restarted N times, or failing and why."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from exactly_once_cli.status import as_json, render
from exactly_once_ops.local_state import StatePaths, UpState, UpStats, WorkerHealth
from exactly_once_ops.status import ConsumerStatus, QueueDepth, StackStatus, SubscriberStatus

EMPTY = QueueDepth(0, 0, 0)
FAILING = "6 worker exits within 60s, the last exit code 1; not restarted any more"
STATS = UpStats(
    updated_at="2030-01-01T00:00:05+00:00",
    consumers={"Orders": {"processed": 3}, "Payments": {}},
    subscribers={"SalesCounter": {"delivered": 1}},
    workers={
        "Orders": WorkerHealth(workers=2, running=2, restarts=1),
        "Payments": WorkerHealth(workers=2, running=0, restarts=5, failing=FAILING),
        "SalesCounter": WorkerHealth(workers=2, running=2),
    },
)
STATUS = StackStatus(
    consumers=[
        ConsumerStatus("orders", "orders", EMPTY, EMPTY, 0, 0),
        ConsumerStatus("payments", "payments", EMPTY, EMPTY, 0, 0),
    ],
    pending_capped=False,
    subscribers=[SubscriberStatus("salescounter", "salescounter", EMPTY, 0, 0)],
)
STATE = UpState(
    pid=42,
    stack="S",
    region="us-east-1",
    endpoint_url="http://localhost:1",
    dynamodb_endpoint_url="http://localhost:2",
    environment={},
    outputs={},
    logs={},
    workers=2,
    started_at="2030-01-01T00:00:00+00:00",
)


def test_worker_health_survives_the_stats_file(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    paths.write_stats(STATS)
    read = paths.read_stats()
    assert read == STATS
    assert read is not None
    assert read.health("orders") == WorkerHealth(workers=2, running=2, restarts=1)
    assert read.health("nobody") is None


def test_json_gives_each_functions_worker_health() -> None:
    document = as_json(STATUS, STATE, STATS)
    orders, payments = document["consumers"]
    assert orders["workers"]["state"] == "2/2 running, restarted 1 time"
    assert orders["workers"]["restarts"] == 1
    assert payments["workers"]["state"] == "failing, 0/2 running"
    assert payments["workers"]["failing"] == FAILING
    (sales,) = document["subscribers"]
    assert sales["workers"]["state"] == "2/2 running"


def test_the_table_shows_worker_health_and_why_a_function_is_failing() -> None:
    console = Console(width=200, record=True)
    console.print(render("S", STATUS, STATE, STATS))
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if "│" in line}
    assert "2/2 running, restarted 1 time" in rows["orders"]
    assert "failing, 0/2 running" in rows["payments"]
    assert "2/2 running" in rows["salescounter (SNS)"]
    assert f"Payments: workers failing: {FAILING}" in text


def test_a_stats_file_from_before_worker_health_still_reads(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    paths.stats.write_text('{"updated_at": "t", "consumers": {"Orders": {"processed": 1}}}\n')
    read = paths.read_stats()
    assert read is not None
    assert read.workers == {}
    assert as_json(STATUS, STATE, read)["consumers"][0]["workers"] is None
