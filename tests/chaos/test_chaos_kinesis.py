"""CI's Kinesis chaos run: a real stream (moto), poller processes leasing its shards, every fault,
a fixed seed; and the self-tests that show each verdict can fail.

Small but dense: kills at each point, zombies at each point, throttles, lost replies, dropped
checkpoints, transient errors, producer retries and each kind of poison. The fenced consumer's
books must close (one effect per order, order kept in every shard, every record processed or
dead-lettered with its reason, every checkpoint at its shard's end); the plain effect's, the
lock-off run's and the reversed batches' must not.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from fault_injection.settings import FaultRates
from fault_injection.stream_harness import KinesisStack, stream_consumers
from fault_injection.stream_report import print_report
from fault_injection.stream_runner import KinesisResult, run_kinesis_chaos
from fault_injection.stream_workload import CRASH_POINTS, PAUSE_POINTS, KinesisSettings, RecordKind
from fault_injection.throttling import THROTTLED_EACH_PROCESS
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.moto_server import MotoServer

FAST = {"shard_lease_s": 3.0, "function_timeout_s": 2.0, "drain_timeout_s": 240.0}

EVERY_FAULT = KinesisSettings(
    records=160,
    rates=FaultRates(
        duplicates=0.15,
        poison=0.04,
        transient=0.05,
        crash=0.03,
        zombie=0.015,
        throttle=0.05,
        delete_failure=0.05,
        lost_reply=0.02,
    ),
    seed=11,
    workers=3,
    shards=3,
    **FAST,  # type: ignore[arg-type]
)

NO_FAULT = FaultRates(
    duplicates=0.0,
    poison=0.0,
    transient=0.0,
    crash=0.0,
    zombie=0.0,
    throttle=0.0,
    delete_failure=0.0,
    lost_reply=0.0,
)


@pytest.fixture(scope="module")
def stack(dynamodb_local: DynamoDBLocal) -> Iterator[KinesisStack]:
    moto = MotoServer().start()
    try:
        yield KinesisStack(moto=moto, dynamodb=dynamodb_local)
    finally:
        moto.stop()


def _run(
    stack: KinesisStack, settings: KinesisSettings, consumer: str, workdir: Path
) -> tuple[KinesisResult, str]:
    kinds = stream_consumers(consumer)
    result = run_kinesis_chaos(settings, kinds, Console(file=io.StringIO()), stack, workdir)
    out = io.StringIO()
    print_report(Console(file=out, width=160), settings, result.plan, result.runs)
    return result, out.getvalue()


@pytest.mark.timeout(400)
def test_every_fault_injected_and_the_books_still_close(
    stack: KinesisStack, tmp_path: Path
) -> None:
    result, report = _run(stack, EVERY_FAULT, "layer", tmp_path)
    [run] = result.runs
    plan = result.plan

    # The faults happened.
    for point in CRASH_POINTS:
        assert run.events[f"crash: {point}"] >= 1, report
    for point in PAUSE_POINTS:
        assert run.events[f"pause: {point}"] >= 1, report
    assert run.pool.killed == run.events["crash"], report
    assert run.pool.paused >= 2, report
    assert min(run.pool.paused_s) > run.pause_s - 1, report
    assert run.pool.exited_otherwise == 0, report
    # Each poller process throttles its THROTTLED_EACH_PROCESS requests and loses the reply of
    # its LOST_EACH_PROCESS-th, on top of the draws (about 14 throttles and 6 lost replies: the
    # draws alone missed ">= 5" and ">= 1" about one run in 500 and in 400).
    assert run.events["throttle"] >= len(THROTTLED_EACH_PROCESS), report
    assert run.events["lost-reply"] >= 1, report
    assert run.events["transient"] >= 1, report
    assert run.batches["takeovers"] >= 1, report
    assert run.events["lease-taken"] > EVERY_FAULT.shards, report  # shards changed hands
    # A woken zombie found its shard gone: its renewal or its checkpoint was refused.
    assert run.events["lease-lost"] + run.events["checkpoint-refused"] >= 1, report
    assert plan.duplicates >= 20, report

    # The invariants held.
    verdict = run.verdict
    assert run.drained, report
    assert verdict.doubles == {}, report
    assert verdict.missing == set(), report
    assert verdict.exactly_once == verdict.expected == len(plan.keys), report
    assert verdict.out_of_order == {}, report
    assert verdict.order_checked == len(plan.keys), report
    assert verdict.lost == [], report
    assert verdict.unread == 0, report
    assert verdict.stuck == [], report
    assert verdict.retryable_failed == [], report
    assert verdict.poison == verdict.poison_with_reason == plan.poison, report
    assert set(verdict.dead_lettered) == {"NonJsonBody", "PermanentError", "MissingKey"}, report
    assert sum(verdict.dead_lettered.values()) == plan.poison, report
    assert verdict.processed == len(plan.records) - plan.poison, report
    assert {r.kind for r in plan.records} == set(RecordKind), report
    assert verdict.ok


@pytest.mark.timeout(400)
def test_the_plain_effect_under_the_same_faults_executes_orders_twice(
    stack: KinesisStack, tmp_path: Path
) -> None:
    """The baseline: the same plan and faults, the effect a plain PutItem. Kills after the
    effect and zombies leave second executions, and the books say so."""
    result, report = _run(stack, EVERY_FAULT, "layer-unfenced", tmp_path)
    [run] = result.runs

    assert run.drained, report
    assert run.verdict.doubles, report
    assert set(run.verdict.doubles) <= result.plan.keys, report
    assert not run.passed, report


@pytest.mark.timeout(300)
def test_with_the_lock_off_the_books_find_the_producer_retries_executed_again(
    stack: KinesisStack, tmp_path: Path
) -> None:
    """The self-test of the exactly-once verdict: producer retries only, the layer's lock off in
    the pollers (every delivery acquires a record of its own): each retry runs again."""
    settings = KinesisSettings(
        records=60,
        rates=FaultRates(**{**vars(NO_FAULT), "duplicates": 0.3}),
        seed=11,
        workers=2,
        shards=2,
        lock_off=True,
        **FAST,  # type: ignore[arg-type]
    )
    result, report = _run(stack, settings, "layer", tmp_path)
    [run] = result.runs

    assert "SELF-TEST: the idempotency lock is OFF" in report
    assert run.drained, report
    assert sum(n - 1 for n in run.verdict.doubles.values()) >= result.plan.duplicates, report
    assert run.verdict.missing == set(), report
    assert not run.passed, report


@pytest.mark.timeout(300)
def test_batches_run_out_of_sequence_fail_the_order_verdict(
    stack: KinesisStack, tmp_path: Path
) -> None:
    """The self-test of the order verdict: no fault, each batch handed to the fenced consumer
    reversed. Every order still runs exactly once; the shards' order is broken, and seen."""
    settings = KinesisSettings(
        records=60,
        rates=NO_FAULT,
        seed=11,
        workers=2,
        shards=2,
        batch_size=10,
        **FAST,  # type: ignore[arg-type]
    )
    result, report = _run(stack, settings, "layer-reversed", tmp_path)
    [run] = result.runs

    assert run.drained, report
    assert run.verdict.doubles == {}, report
    assert run.verdict.missing == set(), report
    assert run.verdict.order_violations >= len(result.plan.keys) // 2, report
    assert not run.passed, report
