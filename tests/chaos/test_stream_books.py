"""The Kinesis chaos books and plan, on synthetic data: what each invariant counts, and that each
can fail."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from exactly_once_cli.app import app
from fault_injection import accounting
from fault_injection.settings import FaultRates
from fault_injection.stream_accounting import (
    Execution,
    Letter,
    account,
    dead_letter_body,
    longest_increasing,
    out_of_order,
)
from fault_injection.stream_feed import Placed
from fault_injection.stream_workload import (
    BEFORE_CHECKPOINT,
    KinesisSettings,
    PlannedRecord,
    RecordKind,
    StreamPlan,
    plan_stream,
)


def _plan(*records: tuple[str | None, RecordKind]) -> StreamPlan:
    plan = StreamPlan()
    for n, (key, kind) in enumerate(records):
        data = json.dumps({"orderId": key, "n": n}).encode() if key else b"not json %d" % n
        plan.records.append(PlannedRecord(data, "p", kind, key))
        if kind is RecordKind.VALID and key:
            plan.keys.add(key)
    return plan


def _ran(key: str, t_ns: int, pid: int = 1) -> Execution:
    return Execution(key, "s", "0", t_ns, pid, 1)


@pytest.mark.parametrize(
    ("values", "longest"),
    [([], 0), ([5], 1), ([1, 2, 3], 3), ([3, 2, 1], 1), ([1, 9, 2, 3, 4], 4), ([2, 1, 4, 3], 2)],
)
def test_longest_increasing_run(values: list[int], longest: int) -> None:
    kept = longest_increasing(values)

    assert len(kept) == longest
    picked = [values[i] for i in sorted(kept)]
    assert picked == sorted(set(picked))  # strictly increasing, in index order


def test_one_order_run_late_counts_once_not_once_per_order_it_overtook() -> None:
    plan = _plan(*[(f"k{n}", RecordKind.VALID) for n in range(6)])
    placed = [Placed("s", str(n + 1)) for n in range(6)]
    times = {"k0": 600, "k1": 100, "k2": 200, "k3": 300, "k4": 400, "k5": 500}
    executions = {key: [_ran(key, t)] for key, t in times.items()}

    checked, moved = out_of_order(plan, placed, executions)

    assert checked == 6
    assert moved == {"s": ["k0"]}


def test_order_is_per_shard_and_a_producer_retry_does_not_move_its_order() -> None:
    # k0 and k1 in shard a, k2 in shard b; a retry of k0 comes last in shard a.
    plan = _plan(
        ("k0", RecordKind.VALID),
        ("k2", RecordKind.VALID),
        ("k1", RecordKind.VALID),
        ("k0", RecordKind.DUPLICATE),
    )
    placed = [Placed("a", "1"), Placed("b", "1"), Placed("a", "2"), Placed("a", "3")]
    # b's order ran before both of a's: other shards do not count.
    executions = {"k0": [_ran("k0", 20)], "k1": [_ran("k1", 30)], "k2": [_ran("k2", 10)]}

    assert out_of_order(plan, placed, executions) == (3, {})

    executions["k1"] = [_ran("k1", 15)]  # k1 took effect before k0, its predecessor in a
    [(shard, moved)] = out_of_order(plan, placed, executions)[1].items()
    assert shard == "a"
    assert len(moved) == 1  # either of the two is the one out of place


def test_the_books_count_doubles_missing_lost_unread_and_dead_letters() -> None:
    plan = _plan(
        ("k0", RecordKind.VALID),
        ("k1", RecordKind.VALID),
        (None, RecordKind.BAD_JSON),
        ("k2", RecordKind.VALID),
        ("k0", RecordKind.DUPLICATE),
    )
    placed = [Placed("s", str(n + 1)) for n in range(5)]
    executions = {"k0": [_ran("k0", 1, pid=7), _ran("k0", 5, pid=8)], "k1": [_ran("k1", 2)]}
    poison = dead_letter_body(plan.records[2].data)

    verdict = account(
        plan,
        placed,
        executions,
        [Letter(poison, None), Letter(poison, "NonJsonBody")],
        ([], []),
        {"s": "4"},  # the retry of k0 (sequence 5) is behind the checkpoint
        killed_pids={7},
        paused_pids=set(),
    )

    assert verdict.doubles == {"k0": 2}
    assert verdict.double_causes == {accounting.KILLED: 1}
    assert verdict.missing == {"k2"}
    assert verdict.lost == [3]  # k2's record: no effect, not in the DLQ
    assert verdict.unread == 1
    assert verdict.dead_lettered == {"NonJsonBody": 1}
    assert verdict.poison == verdict.poison_with_reason == 1
    assert verdict.processed == 3
    assert verdict.out_of_order == {}
    assert not verdict.ok


def test_clean_books_pass() -> None:
    plan = _plan(("k0", RecordKind.VALID), ("k0", RecordKind.DUPLICATE), ("k1", RecordKind.VALID))
    placed = [Placed("s", "1"), Placed("s", "2"), Placed("s", "3")]
    executions = {"k0": [_ran("k0", 1)], "k1": [_ran("k1", 2)]}

    verdict = account(plan, placed, executions, [], ([], []), {"s": "3"}, set(), set())

    assert verdict.ok
    assert verdict.exactly_once == verdict.expected == 2


def test_not_utf8_data_is_matched_by_its_base64_dead_letter_copy() -> None:
    assert dead_letter_body(b"\xff\xfe") == "//4="
    assert dead_letter_body(b"text") == "text"


def test_the_plan_keeps_copies_of_an_order_on_one_partition_key_after_the_original() -> None:
    rates = FaultRates(duplicates=0.2, poison=0.04, crash=0.05, zombie=0.02)
    plan = plan_stream(KinesisSettings(records=400, rates=rates, seed=3))

    assert plan == plan_stream(KinesisSettings(records=400, rates=rates, seed=3))
    partition: dict[str, str] = {}
    seen: set[bytes] = set()
    for record in plan.records:
        if record.key is not None and not record.kind.poison:
            assert partition.setdefault(record.key, record.partition_key) == record.partition_key
        if record.kind is RecordKind.DUPLICATE:
            assert record.data in seen
        seen.add(record.data)
    assert plan.duplicates == 80
    assert {r.kind for r in plan.records} == set(RecordKind)
    crash_points = {json.loads(r.data).get("crash") for r in plan.records if not r.kind.poison}
    assert BEFORE_CHECKPOINT in crash_points
    assert "before-delete" not in crash_points
    assert plan.faults[f"crash: {BEFORE_CHECKPOINT}"] >= 1


def test_the_zombie_pause_outlasts_the_shard_lease_and_the_key_lease() -> None:
    settings = KinesisSettings(shard_lease_s=6, function_timeout_s=3, lease_margin_ms=1000)

    assert settings.zombie_pause_s > 6 + 3 + 1


def test_the_cli_offers_the_kinesis_source_and_refuses_what_it_cannot_do() -> None:
    runner = CliRunner()
    helped = runner.invoke(app, ["chaos", "--help"])
    assert helped.exit_code == 0
    assert "--source" in helped.output
    assert "--shards" in helped.output

    on_postgres = runner.invoke(app, ["chaos", "--source", "kinesis", "--store", "postgres"])
    assert on_postgres.exit_code == 2
    queue_page = runner.invoke(app, ["chaos", "--source", "kinesis", "--markdown", "chaos.md"])
    assert queue_page.exit_code == 2
    unknown = runner.invoke(app, ["chaos", "--source", "kinesis", "--consumers", "powertools"])
    assert unknown.exit_code == 2
