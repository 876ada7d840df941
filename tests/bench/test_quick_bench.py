"""The benchmark harness, quick, in CI: a regression guard on the side-by-side ratios.

Runs once per module against the session's DynamoDB Local; every assertion is a ratio or a
difference measured in the same run, never an absolute time. Call counts are exact; the timing
ratios use the CI margins in `benchmarks.targets` (a shared 2-core machine is noisy), while
`make bench` asserts the targets themselves.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from benchmarks import chart, harness, report
from benchmarks.calls import Case
from benchmarks.imports import LAYER
from benchmarks.instrument import CallCounter, add_latency
from benchmarks.rig import Rig, Variant
from benchmarks.settings import QUICK
from benchmarks.targets import (
    CI_MAX_CPU_RATIO,
    CI_MAX_IMPORT_OVER_BOTO3_S,
    CI_MIN_IO_SPEEDUP,
    EXPECTED_CALLS,
    evaluate,
)
from tools.dynamodb_local import DynamoDBLocal

LATENCY_S = 0.25  # far above a local ListTables, so the check is robust on a busy machine


@pytest.fixture(scope="module")
def results(dynamodb_local: DynamoDBLocal) -> harness.Results:
    return harness.run(dynamodb_local.endpoint, QUICK)


def test_layer_makes_the_target_number_of_dynamodb_calls(results: harness.Results) -> None:
    layer = {c.case: c for c in results.calls if c.variant is Variant.LAYER}
    assert {case: c.per_record("dynamodb") for case, c in layer.items()} == EXPECTED_CALLS
    # The in-progress path also defers the message on SQS, once per record.
    assert layer[Case.IN_PROGRESS].per_record("sqs") == 1


def test_powertools_calls_are_counted_the_same_way(results: harness.Results) -> None:
    """A sanity check on the counter: Powertools' documented calls (put, then update)."""
    powertools = {c.case: c.calls for c in results.calls if c.variant is Variant.POWERTOOLS}
    records = QUICK.call_records
    assert powertools[Case.NEW] == {"dynamodb.PutItem": records, "dynamodb.UpdateItem": records}
    assert powertools[Case.DUPLICATE] == {"dynamodb.PutItem": records}


def test_io_bound_batch_of_10_is_several_times_faster(results: harness.Results) -> None:
    io10 = results.wall_result(10, io_bound=True)
    assert io10.speedup >= CI_MIN_IO_SPEEDUP, io10.samples


def test_layer_cpu_per_record_stays_level_with_powertools(results: harness.Results) -> None:
    assert results.cpu.ratio <= CI_MAX_CPU_RATIO, results.cpu.samples


def test_import_with_boto3_stays_close_to_bare_boto3(results: harness.Results) -> None:
    over = results.imports.cpu_over_bare(LAYER)
    assert over <= CI_MAX_IMPORT_OVER_BOTO3_S, results.imports.cpu


def test_report_and_chart_are_written(results: harness.Results, tmp_path: Path) -> None:
    targets = evaluate(results)
    text = report.render(results, targets, "benchmarks.png")
    for target in targets:
        assert target.name in text
    assert "| new | **2** |" in text
    png = tmp_path / "benchmarks.png"
    chart.draw(results, png)
    assert png.read_bytes().startswith(b"\x89PNG")


def test_hooks_apply_only_to_the_client_they_are_attached_to(
    dynamodb_local: DynamoDBLocal,
) -> None:
    """Both libraries' clients come from one session; instrumenting one must not touch another."""
    rig = Rig(dynamodb_local.endpoint, dynamodb_local.endpoint, latency_s=LATENCY_S)
    counter = CallCounter()
    counted = rig.client("dynamodb", counter, latency=False)
    other = rig.client("dynamodb", latency=False)
    counted.list_tables()
    other.list_tables()
    other.list_tables()
    assert counter.snapshot() == {"dynamodb.ListTables": 1}

    add_latency(counted, LATENCY_S)
    started = time.perf_counter()
    other.list_tables()
    assert time.perf_counter() - started < LATENCY_S
    started = time.perf_counter()
    counted.list_tables()
    assert time.perf_counter() - started >= LATENCY_S
    assert counter.total("dynamodb") == 2
