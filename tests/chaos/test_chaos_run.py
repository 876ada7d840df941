"""CI's fault-injection run: the deployed stack, real worker processes, every fault, fixed seed.

Small but dense: every kind of fault is planned at least once (crashes at each point, zombies
at each point, throttles, dropped deletes, transient errors, duplicates, each kind of poison),
and the books must close: one effect per key, every message processed or dead-lettered with
its reason, nothing left IN_PROGRESS or FAILED-but-retryable.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from exactly_once_cli.app import app
from fault_injection import injection
from fault_injection.consumers import by_names
from fault_injection.report import print_report
from fault_injection.runner import run_chaos
from fault_injection.settings import DEPLOY_CONTEXT, ChaosSettings, FaultRates, StoreKind
from fault_injection.throttling import THROTTLED_EACH_PROCESS
from fault_injection.workload import Kind
from local_aws.local_stack import LocalStack
from tests.chaos.lock_off import assert_the_books_find_the_doubles, run_lock_off

SETTINGS = ChaosSettings(
    messages=240,
    rates=FaultRates(
        duplicates=0.15,
        poison=0.03,
        transient=0.05,
        crash=0.03,
        zombie=0.01,
        throttle=0.05,
        delete_failure=0.05,
    ),
    seed=11,
    workers=3,
    drain_timeout_s=240,
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(context={**DEPLOY_CONTEXT, "stackName": "ChaosCi"}) as running:
        yield running


@pytest.mark.timeout(400)
def test_every_fault_injected_and_the_books_still_close(stack: LocalStack, tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=140)
    result = run_chaos(SETTINGS, by_names(["layer"]), console, stack=stack, workdir=tmp_path)
    print_report(console, SETTINGS, result.plan, result.runs)
    [run] = result.runs
    report = out.getvalue()

    # The faults happened: the planned ones fired, the random ones were drawn.
    for point in injection.CRASH_POINTS:
        assert run.events[f"crash: {point}"] >= 1, report
    for point in injection.PAUSE_POINTS:
        assert run.events[f"pause: {point}"] >= 1, report
    assert run.pool.killed == run.events["crash"], report
    assert run.pool.paused >= 2, report
    assert min(run.pool.paused_s) > run.pause_s - 1, report
    assert run.pool.exited_otherwise == 0, report
    # Each worker process throttles its THROTTLED_EACH_PROCESS requests, and some process always
    # reaches them; the draws come on top (about 16 at 5 %, so ">= 10" failed about one run in 25).
    assert run.events["throttle"] >= len(THROTTLED_EACH_PROCESS), report
    assert run.events["transient"] >= 1, report
    assert run.batches["delete_dropped"] >= 1, report
    assert run.batches["takeovers"] >= 1, report
    assert result.plan.duplicates >= 30, report

    # The invariants held.
    verdict = run.verdict
    assert run.drained, report
    assert verdict.doubles == {}, report
    assert verdict.missing == set(), report
    assert verdict.exactly_once == verdict.expected == len(result.plan.keys), report
    assert verdict.lost == [], report
    assert verdict.stuck == [], report
    assert verdict.retryable_failed == [], report
    assert verdict.redriven == 0, report
    assert verdict.left_in_queue == 0, report
    assert verdict.poison == verdict.poison_with_reason == result.plan.poison, report
    assert set(verdict.dead_lettered) == {"NonJsonBody", "PermanentError", "MissingKey"}, report
    assert sum(verdict.dead_lettered.values()) == result.plan.poison, report
    assert verdict.processed == len(result.plan.messages) - result.plan.poison, report
    assert {m.kind for m in result.plan.messages} == set(Kind), report
    assert verdict.ok


@pytest.mark.timeout(300)
def test_with_the_lock_off_the_books_find_the_double_executions(
    stack: LocalStack, tmp_path: Path
) -> None:
    """The self-test: the same harness with the layer's lock off in the workers (every delivery
    acquires a record of its own). The fenced column's books must fail, with each repeated
    message's key executed again; under `record_effect` they passed all the same."""
    result, report = run_lock_off(stack, StoreKind.DYNAMODB, tmp_path)

    assert_the_books_find_the_doubles(result, report)


def test_the_cli_registers_the_command() -> None:
    result = CliRunner().invoke(app, ["chaos", "--help"])

    assert result.exit_code == 0
    assert "--consumers" in result.output
    assert "--zombie" in result.output
    assert "--lock-off" in result.output
    refused = CliRunner().invoke(app, ["chaos", "--lock-off", "--markdown", "x.md"])
    assert refused.exit_code == 2  # a self-test writes no docs page
