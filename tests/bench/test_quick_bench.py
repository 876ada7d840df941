"""The benchmark harness in CI: exact counts only, never a wall-clock time or ratio.

A shared, loaded machine skews timings (a clean run measured 3.78x against a 4x floor), so the
timing targets are left to `make bench`. What makes the layer faster is checked here exactly:
the requests each batch costs, and that one batch's 10 records run side by side. The HTTP
API row is checked the same way: its calls per first request and per replay, for both libraries.
So is the store row: the round trips per record of the layer on DynamoDB and on PostgreSQL.
Everything runs against the session's DynamoDB Local and PostgreSQL server.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import chart, harness, report
from benchmarks.api import ARMS, ApiCase, Clock
from benchmarks.calls import Case
from benchmarks.concurrency import Overlap, batch_overlap
from benchmarks.imports import LAYER_ALL_ROOMS, LAYER_BUILDS, LAYER_COMPILED, measure_layer
from benchmarks.instrument import CallCounter, add_latency
from benchmarks.load import Load
from benchmarks.pg_wire import STARTUP, TERMINATE
from benchmarks.rig import Rig, Variant
from benchmarks.run import LOADED_EXIT, exit_code, publish
from benchmarks.settings import SMOKE
from benchmarks.stores import Backend, StoreCase
from benchmarks.targets import API_EXPECTED_CALLS, evaluate, expected_batch_calls
from benchmarks.throughput import ARMS as THROUGHPUT_ARMS
from local_aws.dynamodb_local import DynamoDBLocal

BATCH = 10  # an SQS batch, and the layer's default concurrency
LATENCY_S = 0.25


@pytest.fixture(scope="module")
def results(dynamodb_local: DynamoDBLocal, pg_dsn: str) -> harness.Results:
    """One smoke run of the whole harness: call counts, plus every timing path run once."""
    return harness.run(dynamodb_local.endpoint, SMOKE, postgres_dsn=pg_dsn)


@pytest.fixture(scope="module")
def rig(dynamodb_local: DynamoDBLocal) -> Iterator[Rig]:
    with harness.bench_rig(dynamodb_local.endpoint, SMOKE) as rig:
        yield rig


def test_layer_makes_the_target_number_of_requests_per_batch(results: harness.Results) -> None:
    """A batch of new records: one DynamoDB request to acquire its keys, one to complete them; a
    batch of duplicates: the acquire alone; in progress: the acquire, and one SQS deferral per
    record. Nothing else, and the targets say the same."""
    layer = {c.case: c for c in results.calls if c.variant is Variant.LAYER}
    assert [c.records for c in layer.values()] == [
        SMOKE.call_records,
        SMOKE.call_records,
        SMOKE.in_progress_records,
    ]
    for case, counts in layer.items():
        want = expected_batch_calls(case, counts.records)
        assert {s: counts.per_batch(s) for s in want} == want, counts.calls
        assert counts.per_batch() == sum(want.values()), counts.calls
    assert expected_batch_calls(Case.NEW, 10) == {"dynamodb": 2}
    assert expected_batch_calls(Case.DUPLICATE, 10) == {"dynamodb": 1}
    assert expected_batch_calls(Case.IN_PROGRESS, 10) == {"dynamodb": 1, "sqs": 10}
    exact = [t for t in evaluate(results) if t.name.startswith("Requests per batch")]
    assert [t.passed for t in exact] == [True] * len(Case)


def test_powertools_calls_are_counted_the_same_way(results: harness.Results) -> None:
    """A sanity check on the counter: Powertools' documented calls (put, then update)."""
    powertools = {c.case: c.calls for c in results.calls if c.variant is Variant.POWERTOOLS}
    records = SMOKE.call_records
    assert powertools[Case.NEW] == {"dynamodb.PutItem": records, "dynamodb.UpdateItem": records}
    assert powertools[Case.DUPLICATE] == {"dynamodb.PutItem": records}


def test_api_calls_per_request_are_exact_for_both_libraries(results: harness.Results) -> None:
    """The layer: one UpdateItem to acquire and one to complete, and a replay is the acquire
    refused with the stored response in it. Powertools: a conditional PutItem, then an
    UpdateItem with the response, and a replay is the PutItem refused (ALL_OLD)."""
    requests = SMOKE.api_call_requests
    calls = {(c.variant, c.case): c.calls for c in results.api.calls}
    assert calls == {
        (Variant.LAYER, ApiCase.FIRST): {"dynamodb.UpdateItem": 2 * requests},
        (Variant.LAYER, ApiCase.REPLAY): {"dynamodb.UpdateItem": requests},
        (Variant.POWERTOOLS, ApiCase.FIRST): {
            "dynamodb.PutItem": requests,
            "dynamodb.UpdateItem": requests,
        },
        (Variant.POWERTOOLS, ApiCase.REPLAY): {"dynamodb.PutItem": requests},
    }
    layer = {case: results.api.counts(Variant.LAYER, case).per_request() for case in ApiCase}
    assert layer == API_EXPECTED_CALLS


def test_api_overhead_is_measured_for_every_arm(results: harness.Results) -> None:
    """The timing path runs (its values are `make bench`'s to judge, not this test's)."""
    timings = results.api.timings
    assert set(timings.samples) == {(c, case, a) for c in Clock for case in ApiCase for a in ARMS}
    assert all(len(s) == SMOKE.api_repetitions for s in timings.samples.values())


def test_store_round_trips_per_batch_are_exact_on_both_backends(
    results: harness.Results,
) -> None:
    """DynamoDB: one BatchExecuteStatement to acquire the batch's keys and one to complete them,
    each fenced effect a TransactWriteItems of its own. PostgreSQL: one statement acquires the
    batch, a new key or a duplicate alike, and one fenced write completes it; a record whose
    effect is in its transaction (psycopg opens it with BEGIN) keeps its own completion, sent
    with its COMMIT in one round trip, so the effect commits with it: every effect is in the
    ledger afterwards, on both backends."""
    assert results.stores is not None
    records = SMOKE.call_records
    trips = {  # a connection the pool opens meanwhile is no round trip of a record's
        (t.backend, t.case): {k: n for k, n in t.trips.items() if k not in (STARTUP, TERMINATE)}
        for t in results.stores.round_trips
    }
    assert trips == {
        (Backend.DYNAMODB, StoreCase.NEW): {"dynamodb.BatchExecuteStatement": 2},
        (Backend.DYNAMODB, StoreCase.DUPLICATE): {"dynamodb.BatchExecuteStatement": 1},
        (Backend.DYNAMODB, StoreCase.EFFECT): {
            "dynamodb.BatchExecuteStatement": 2,
            "dynamodb.TransactWriteItems": records,
        },
        (Backend.POSTGRES, StoreCase.NEW): {"acquire": 1, "fenced write": 1},
        (Backend.POSTGRES, StoreCase.DUPLICATE): {"acquire": 1},
        (Backend.POSTGRES, StoreCase.EFFECT): {
            "acquire": 1,
            "BEGIN": records,
            "effect INSERT": records,
            "completion + COMMIT": records,
        },
    }
    assert results.stores.effects_committed == {
        Backend.DYNAMODB: records,
        Backend.POSTGRES: records,
    }
    store_targets = [
        t for t in evaluate(results) if t.name.startswith(("PostgreSQL:", "DynamoDB:"))
    ]
    assert len(store_targets) == 4
    assert all(t.passed for t in store_targets)


def test_layer_runs_all_records_of_a_batch_at_once(rig: Rig) -> None:
    """Each call waits at a barrier until all 10 are inside, so 10 is exact, not a sample.

    Were the layer to run fewer at once, the barrier would break at its timeout and the
    records would fail, so this cannot pass by luck nor fail on a slow machine.
    """
    overlap = batch_overlap(rig, Variant.LAYER, BATCH, rendezvous=BATCH)
    assert overlap == Overlap(max_in_flight=BATCH, calls=BATCH, failed=0)


def test_powertools_runs_the_records_of_a_batch_one_at_a_time(rig: Rig) -> None:
    """The reference point of the speed-up: BatchProcessor is synchronous."""
    overlap = batch_overlap(rig, Variant.POWERTOOLS, BATCH)
    assert overlap == Overlap(max_in_flight=1, calls=BATCH, failed=0)


def test_report_and_chart_are_written(results: harness.Results, tmp_path: Path) -> None:
    targets = evaluate(results)
    text = report.render(results, targets, "benchmarks.png")
    for target in targets:
        assert target.name in text
    assert f"| {SMOKE.call_records} new records | **2** |" in text
    assert f"| {SMOKE.call_records} duplicate records | **1** |" in text
    assert "## Throughput at saturation" in text
    assert "workflows/s per database vCPU" in text
    assert "Measured on a loaded machine" not in text
    assert "| first request | **2** | UpdateItem 2 | **2** | PutItem 1 + UpdateItem 1 |" in text
    assert "| replay | **1** | UpdateItem 1 | **1** | PutItem 1 |" in text
    assert f"| {SMOKE.call_records} records, duplicate | **1** | BatchExecuteStatement 1 | " in text
    exact = [t for t in targets if t.name.startswith("API: DynamoDB calls")]
    assert len(exact) == len(ApiCase)
    assert all(t.passed for t in exact)
    png = tmp_path / "benchmarks.png"
    chart.draw(results, png)
    assert png.read_bytes().startswith(b"\x89PNG")


def test_the_throughput_row_runs_every_arm_over_its_records(results: harness.Results) -> None:
    """The layer on DynamoDB Local and on PostgreSQL, and Powertools: each ran every record
    once without a failure (run_arm checks it), over the settings' processes."""
    assert results.throughput is not None
    rows = results.throughput.rows
    assert [r.arm for r in rows] == list(THROUGHPUT_ARMS)
    assert {(r.records, r.processes) for r in rows} == {
        (SMOKE.throughput_records, SMOKE.throughput_processes)
    }
    assert all(r.client_cpu_s > 0 and r.machine_cpu_s for r in rows)


def test_the_committed_report_is_left_alone_when_the_machine_was_loaded(
    results: harness.Results, tmp_path: Path
) -> None:
    committed = tmp_path / "benchmarks.md"
    committed.write_text("the committed report\n")
    targets, where = publish(results, tmp_path, Load(1.6, 0.7))
    assert committed.read_text() == "the committed report\n"
    assert not (tmp_path / "benchmarks.png").exists()
    assert where.report == tmp_path / "benchmarks.loaded.md"
    assert "Measured on a loaded machine" in where.report.read_text()
    assert "(benchmarks.loaded.png)" in where.report.read_text()
    assert (tmp_path / "benchmarks.loaded.png").read_bytes().startswith(b"\x89PNG")
    all_met = [dataclasses.replace(t, passed=True) for t in targets]
    assert exit_code(all_met, where) == LOADED_EXIT
    assert exit_code([*all_met[1:], dataclasses.replace(targets[0], passed=False)], where) == 1

    targets, where = publish(results, tmp_path, Load(0.4, 0.7))
    assert where.report == committed
    assert "Measured on a loaded machine" not in committed.read_text()
    assert exit_code(all_met, where) == 0


def test_the_built_layer_rows_are_rendered_and_judged(results: harness.Results) -> None:
    """The smoke settings leave the built layers out, so they are measured here once (every
    case, as `make bench` does) and put in the smoke run's results: the consumer row, the
    all-rooms row, what the lazy rooms save, and both built-layer targets are in the report."""
    layer = measure_layer(1, tuple(LAYER_BUILDS))
    with_layer = dataclasses.replace(
        results, imports=dataclasses.replace(results.imports, layer=layer)
    )
    targets = evaluate(with_layer)
    text = report.render(with_layer, targets, "benchmarks.png")
    built = [t for t in targets if t.name.startswith("Built layer")]
    assert [t.name for t in built] == [
        "Built layer's consumer import, compiled / source only (CPU time)",
        "Built layer's consumer import / consumer + the SNS and HTTP rooms (CPU time)",
    ]
    assert all(t.name in text for t in built)
    consumer, all_rooms = layer.modules[LAYER_COMPILED], layer.modules[LAYER_ALL_ROOMS]
    assert f"{consumer} / {all_rooms} layer modules, none from a lazy room" in built[1].measured
    assert f"| {LAYER_COMPILED} | {consumer} | none |" in text
    rooms = layer.room_modules(LAYER_ALL_ROOMS)
    assert f"| {LAYER_ALL_ROOMS} | {all_rooms} | http {rooms['exactly_once/http/']}, sns " in text
    saved = all_rooms - consumer
    assert f"The lazy rooms save a queue consumer {saved} layer modules and " in text
    # Without the built layers (the smoke run as it is), the section says so instead.
    plain = report.render(results, evaluate(results), "benchmarks.png")
    assert "The lazy rooms were not measured in this run" in plain


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

    delays: list[float] = []  # each delay the latency hook asks for, instead of sleeping
    add_latency(counted, LATENCY_S, sleep=delays.append)
    other.list_tables()
    assert delays == []
    counted.list_tables()
    assert delays == [LATENCY_S]
    assert counter.total("dynamodb") == 2
