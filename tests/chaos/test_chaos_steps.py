"""The three-step chaos run (issue 29): the deployed stack, real worker processes, crashes between
and inside steps, zombies, throttles, lost replies of the steps' writes, fixed seed.

The steps column must close its books per (key, step): one effect entry for each of charge,
ship and email, every key COMPLETED, poison in the DLQ. In the same run the same three effects
without steps must show doubles at the keys that crashed between steps, and with the lock off
the steps column's books must fail: the verdict is not one that holds by construction.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from exactly_once_cli.app import app
from fault_injection.consumers import by_names
from fault_injection.runner import ChaosResult, run_chaos
from fault_injection.settings import DEPLOY_CONTEXT, ChaosSettings, FaultRates, StoreKind, Workload
from fault_injection.steps_books import StepsVerdict
from fault_injection.steps_page import make_command, write_page
from fault_injection.steps_report import print_report
from fault_injection.steps_workload import (
    AFTER_STEP_1,
    AFTER_STEP_2,
    CRASH_POINTS,
    IN_STEP_2,
    PAUSE_POINTS,
    STEPS,
    plan_steps,
)
from fault_injection.throttling import THROTTLED_EACH_PROCESS
from fault_injection.workload import Kind
from local_aws.local_stack import LocalStack
from tests.chaos.lock_off import lock_off_settings

SETTINGS = ChaosSettings(
    messages=240,
    rates=FaultRates(
        duplicates=0.15,
        poison=0.03,
        transient=0.05,
        crash=0.05,
        zombie=0.01,
        throttle=0.05,
        delete_failure=0.05,
        lost_reply=0.03,
    ),
    seed=11,
    workers=3,
    drain_timeout_s=240,
    workload=Workload.STEPS,
)


def verdict_of(result: ChaosResult, name: str) -> StepsVerdict:
    run = result.run(name)
    assert run is not None
    assert isinstance(run.verdict, StepsVerdict)
    return run.verdict


def report_of(result: ChaosResult) -> str:
    out = io.StringIO()
    print_report(Console(file=out, width=160), result.settings, result.plan, result.runs)
    return out.getvalue()


def keys_planned_at(result: ChaosResult, *points: str) -> set[str]:
    return {
        m.key
        for m in result.plan.messages
        if m.key and m.kind is Kind.VALID and json.loads(m.body).get("crash") in points
    }


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(context={**DEPLOY_CONTEXT, "stackName": "ChaosSteps"}) as running:
        yield running


@pytest.fixture(scope="module")
def result(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> ChaosResult:
    return run_chaos(
        SETTINGS,
        by_names(["steps", "steps-plain"], StoreKind.DYNAMODB, Workload.STEPS),
        Console(file=io.StringIO()),
        stack=stack,
        workdir=tmp_path_factory.mktemp("steps"),
    )


def test_the_plan_deals_every_step_point() -> None:
    plan = plan_steps(SETTINGS)

    for point in CRASH_POINTS:
        assert plan.faults[f"crash: {point}"] >= 2, plan.faults
    for point in PAUSE_POINTS:
        assert plan.faults[f"pause: {point}"] >= 1, plan.faults
    # A duplicate still repeats its original's body verbatim.
    originals = {m.key: m.body for m in plan.messages if m.kind is Kind.VALID}
    assert all(m.body == originals[m.key] for m in plan.messages if m.kind is Kind.DUPLICATE)
    assert plan_steps(SETTINGS) == plan


# The module's stack and both consumers' runs count here (130 s on a quiet machine, 231 s on
# a loaded one); each run's own drain bound is 240 s, so 600 s could stop a slow but bounded
# run before its report said why.
@pytest.mark.timeout(900)
def test_every_step_once_under_crashes_zombies_and_lost_replies(result: ChaosResult) -> None:
    report = report_of(result)
    run = result.run("steps")
    assert run is not None
    verdict = verdict_of(result, "steps")

    # The faults happened.
    for point in CRASH_POINTS:
        assert run.events[f"crash: {point}"] >= 1, report
    for point in PAUSE_POINTS:
        assert run.events[f"pause: {point}"] >= 1, report
    assert run.pool.killed == run.events["crash"], report
    assert run.pool.paused >= 2, report
    assert run.pool.exited_otherwise == 0, report
    assert run.events["throttle"] >= len(THROTTLED_EACH_PROCESS), report
    assert run.events["lost-reply"] >= 1, report
    assert run.batches["takeovers"] >= 1, report
    # A holder after a crash between steps found the finished steps and did not rerun them.
    assert run.events["step-resumed"] >= 1, report

    # The books closed, per (key, step).
    assert run.drained, report
    assert verdict.step_doubles == {}, report
    assert verdict.missing == set(), report
    assert verdict.incomplete == {}, report
    assert verdict.steps_exactly_once == dict.fromkeys(STEPS, len(result.plan.keys)), report
    assert verdict.exactly_once == verdict.expected == len(result.plan.keys), report
    assert verdict.not_completed == [], report
    assert verdict.provider_split == {}, report
    assert verdict.lost == [], report
    assert verdict.stuck == [], report
    assert verdict.retryable_failed == [], report
    assert verdict.redriven == 0, report
    assert verdict.left_in_queue == 0, report
    assert verdict.poison == verdict.poison_with_reason == result.plan.poison, report
    assert sum(verdict.dead_lettered.values()) == result.plan.poison, report
    assert verdict.processed == len(result.plan.messages) - result.plan.poison, report
    assert verdict.ok, report
    assert re.findall(r"^\W*verdict\W+(PASS|FAIL)\W+(PASS|FAIL)\b", report, re.MULTILINE) == [
        ("PASS", "FAIL")
    ], report


def test_the_same_effects_without_steps_run_again_after_a_crash_between_steps(
    result: ChaosResult,
) -> None:
    """The comparison column, in the same run: a key whose worker died after its charge was
    charged again by the next delivery; with steps the same keys were charged once."""
    report = report_of(result)
    plain = verdict_of(result, "steps-plain")
    crashed_after_charge = keys_planned_at(result, AFTER_STEP_1, AFTER_STEP_2, IN_STEP_2)

    assert crashed_after_charge, report
    assert not plain.ok, report
    charged_twice = {key for key, step in plain.step_doubles if step == "charge"}
    assert crashed_after_charge <= charged_twice, report
    steps = verdict_of(result, "steps")
    assert all((key, "charge") not in steps.step_doubles for key in crashed_after_charge)


def test_the_page_is_written_with_its_make_command(result: ChaosResult, tmp_path: Path) -> None:
    page = tmp_path / "chaos-steps.md"
    command = make_command(["chaos", "--workload", "steps", "--markdown", "docs/chaos-steps.md"])

    write_page(page, result, command)

    text = page.read_text()
    assert command == 'make chaos WORKLOAD=steps ARGS="--markdown docs/chaos-steps.md"'
    assert f"Produced by `{command}`" in text
    assert "| layer, three ctx.step | layer, three plain effects |" in text
    assert "| verdict | PASS | FAIL |" in text


@pytest.mark.timeout(300)
def test_with_the_lock_off_the_steps_books_fail(stack: LocalStack, tmp_path: Path) -> None:
    """The self-test: every delivery acquires a record of its own, so each duplicate runs all
    three steps again, and the steps verdict must find it."""
    settings = replace(lock_off_settings(StoreKind.DYNAMODB), workload=Workload.STEPS)
    lock_off = run_chaos(
        settings,
        by_names(["steps"], StoreKind.DYNAMODB, Workload.STEPS),
        Console(file=io.StringIO()),
        stack=stack,
        workdir=tmp_path,
    )
    report = report_of(lock_off)
    [run] = lock_off.runs
    verdict = verdict_of(lock_off, "steps")

    assert "SELF-TEST: the idempotency lock is OFF" in report
    assert run.drained, report
    assert not verdict.ok, report
    for step in STEPS:
        extra = sum(n - 1 for (_, s), n in verdict.step_doubles.items() if s == step)
        assert extra >= lock_off.plan.duplicates, report
    assert {key for key, _ in verdict.step_doubles} <= lock_off.plan.keys, report
    assert verdict.missing == set(), report
    assert re.findall(r"^\W*verdict\W+(PASS|FAIL)\b", report, re.MULTILINE) == ["FAIL"], report


def test_the_cli_takes_the_workload() -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["chaos", "--help"])
    assert shown.exit_code == 0
    assert "--workload" in shown.output
    wrong_page = runner.invoke(app, ["chaos", "--workload", "steps", "--markdown", "chaos.md"])
    assert wrong_page.exit_code == 2
    unknown = runner.invoke(app, ["chaos", "--workload", "steps", "--consumers", "powertools"])
    assert unknown.exit_code == 2
    kinesis = runner.invoke(app, ["chaos", "--workload", "steps", "--source", "kinesis"])
    assert kinesis.exit_code == 2
    page = ["--markdown", "docs/chaos-steps.md", "--store", "postgres"]
    postgres_page = runner.invoke(app, ["chaos", "--workload", "steps", *page])
    assert postgres_page.exit_code == 2
