"""The three-step chaos run on the PostgreSQL store: each step an atomic phase (its log row in
`step.transaction`, committed with its recovery point), under crashes between and inside
steps, zombies, dropped connections and lost replies (a step's commit included).

The books are the DynamoDB run's (steps_books), read from the database. With the lock off,
every duplicate runs its three steps again and the books must fail.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from fault_injection.consumers import by_names
from fault_injection.runner import ChaosResult, run_chaos
from fault_injection.settings import DEPLOY_CONTEXT, ChaosSettings, FaultRates, StoreKind, Workload
from fault_injection.steps_books import StepsVerdict
from fault_injection.steps_report import print_report
from fault_injection.steps_workload import CRASH_POINTS, PAUSE_POINTS, STEPS
from local_aws.local_postgres import LocalPostgres
from local_aws.local_stack import LocalStack
from tests.chaos.lock_off import lock_off_settings

SETTINGS = ChaosSettings(
    messages=200,
    rates=FaultRates(
        duplicates=0.15,
        poison=0.03,
        transient=0.05,
        crash=0.05,
        zombie=0.01,
        throttle=0.05,
        delete_failure=0.05,
        lost_reply=0.05,
    ),
    seed=11,
    workers=3,
    drain_timeout_s=240,
    store=StoreKind.POSTGRES,
    workload=Workload.STEPS,
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    context = {**DEPLOY_CONTEXT, "stackName": "ChaosStepsPg"}
    with LocalStack(context=context, postgres=LocalPostgres(fsync=False)) as running:
        yield running


def run_steps(stack: LocalStack, settings: ChaosSettings, workdir: Path) -> ChaosResult:
    kinds = by_names(["steps"], StoreKind.POSTGRES, Workload.STEPS)
    return run_chaos(settings, kinds, Console(file=io.StringIO()), stack=stack, workdir=workdir)


def report_of(result: ChaosResult) -> str:
    out = io.StringIO()
    print_report(Console(file=out, width=160), result.settings, result.plan, result.runs)
    return out.getvalue()


@pytest.mark.timeout(500)
def test_every_step_once_in_its_own_transaction(stack: LocalStack, tmp_path: Path) -> None:
    result = run_steps(stack, SETTINGS, tmp_path)
    [run] = result.runs
    report = report_of(result)
    verdict = run.verdict
    assert isinstance(verdict, StepsVerdict)

    for point in CRASH_POINTS:
        assert run.events[f"crash: {point}"] >= 1, report
    for point in PAUSE_POINTS:
        assert run.events[f"pause: {point}"] >= 1, report
    assert run.pool.killed == run.events["crash"], report
    assert run.pool.paused >= 2, report
    assert run.pool.exited_otherwise == 0, report
    assert run.events["pg-fault: fail step"] + run.events["pg-fault: lose step"] >= 1, report
    assert run.events["step-resumed"] >= 1, report

    assert run.drained, report
    assert verdict.step_doubles == {}, report
    assert verdict.missing == set(), report
    assert verdict.incomplete == {}, report
    assert verdict.steps_exactly_once == dict.fromkeys(STEPS, len(result.plan.keys)), report
    assert verdict.not_completed == [], report
    assert verdict.provider_split == {}, report
    assert verdict.lost == [], report
    assert verdict.stuck == [], report
    assert verdict.retryable_failed == [], report
    assert verdict.redriven == 0, report
    assert verdict.poison == verdict.poison_with_reason == result.plan.poison, report
    assert verdict.processed == len(result.plan.messages) - result.plan.poison, report
    assert verdict.ok, report


@pytest.mark.timeout(300)
def test_with_the_lock_off_the_steps_books_fail(stack: LocalStack, tmp_path: Path) -> None:
    settings = replace(lock_off_settings(StoreKind.POSTGRES), workload=Workload.STEPS)
    result = run_steps(stack, settings, tmp_path)
    [run] = result.runs
    report = report_of(result)
    verdict = run.verdict
    assert isinstance(verdict, StepsVerdict)

    assert "SELF-TEST: the idempotency lock is OFF" in report
    assert run.drained, report
    assert not verdict.ok, report
    for step in STEPS:
        extra = sum(n - 1 for (_, s), n in verdict.step_doubles.items() if s == step)
        assert extra >= result.plan.duplicates, report
    assert verdict.missing == set(), report
    assert re.findall(r"^\W*verdict\W+(PASS|FAIL)\b", report, re.MULTILINE) == ["FAIL"], report
