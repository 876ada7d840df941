"""CI's fault-injection run on PostgreSQL: the deployed stack's queue, real worker processes, the
store on a local PostgreSQL server and the effect in the same transaction as the completion.

Sized like the DynamoDB run (tests/chaos/test_chaos_run.py): small but dense, so every kind of
fault happens at least once, connection drops and lost replies at the driver's edge included;
the books must close with one ledger row per key, every message processed or dead-lettered
with its reason, and nothing left IN_PROGRESS or FAILED-but-retryable.
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
from fault_injection.page import write_page
from fault_injection.pg_policy import EACH_PROCESS
from fault_injection.report import print_report
from fault_injection.runner import ChaosResult, run_chaos
from fault_injection.settings import DEPLOY_CONTEXT, ChaosSettings, FaultRates, StoreKind
from local_aws.local_postgres import LocalPostgres
from local_aws.local_stack import LocalStack
from tests.chaos.lock_off import assert_the_books_find_the_doubles, run_lock_off

SETTINGS = ChaosSettings(
    messages=200,
    rates=FaultRates(
        duplicates=0.15,
        poison=0.03,
        transient=0.05,
        crash=0.03,
        zombie=0.01,
        throttle=0.05,
        delete_failure=0.05,
        lost_reply=0.03,
    ),
    seed=11,
    workers=3,
    drain_timeout_s=240,
    store=StoreKind.POSTGRES,
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    context = {**DEPLOY_CONTEXT, "stackName": "ChaosPgCi"}
    with LocalStack(context=context, postgres=LocalPostgres(fsync=False)) as running:
        yield running


@pytest.fixture(scope="module")
def result(stack: LocalStack, tmp_path_factory: pytest.TempPathFactory) -> ChaosResult:
    workdir = tmp_path_factory.mktemp("chaos-pg")
    kinds = by_names(["layer"], StoreKind.POSTGRES)
    return run_chaos(SETTINGS, kinds, Console(file=io.StringIO()), stack=stack, workdir=workdir)


def report_of(result: ChaosResult) -> str:
    out = io.StringIO()
    print_report(Console(file=out, width=160), SETTINGS, result.plan, result.runs)
    return out.getvalue()


@pytest.mark.timeout(400)
def test_every_fault_injected_and_the_books_still_close(result: ChaosResult) -> None:
    [run] = result.runs
    report = report_of(result)

    # The faults happened: the planned ones fired, the random ones were drawn.
    for point in injection.CRASH_POINTS:
        assert run.events[f"crash: {point}"] >= 1, report
    for point in injection.PAUSE_POINTS:
        assert run.events[f"pause: {point}"] >= 1, report
    assert run.pool.killed == run.events["crash"], report
    assert run.pool.paused >= 2, report
    assert run.pool.exited_otherwise == 0, report
    assert run.events["throttle"] == 0, report  # no DynamoDB call is the store's here
    assert run.events["transient"] >= 1, report
    assert run.batches["delete_dropped"] >= 1, report
    assert run.batches["takeovers"] >= 1, report
    # Each worker process meets EACH_PROCESS's planned drops and lost replies (the draws alone
    # could miss one: CI once saw 9 drops where it asked for 10), and the draws come on top.
    for kind, planned in EACH_PROCESS.items():
        for fault in planned.values():
            assert run.events[f"pg-fault: {fault} {kind}"] >= 1, report

    # The invariants held: one ledger row per key, with the effect in the transaction.
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
    assert sum(verdict.dead_lettered.values()) == result.plan.poison, report
    assert verdict.processed == len(result.plan.messages) - result.plan.poison, report
    assert verdict.ok


def test_the_report_says_postgresql_and_counts_the_driver_faults(
    result: ChaosResult, tmp_path: Path
) -> None:
    [run] = result.runs
    report = report_of(result)
    assert "Fault injection on PostgreSQL" in report
    assert "PostgreSQL connections dropped before a statement" in report
    assert "DynamoDB requests throttled" not in report

    page = tmp_path / "chaos-postgres.md"
    write_page(page, result, "eonce chaos --store postgres")
    text = page.read_text()
    assert text.startswith("# Fault injection on PostgreSQL")
    assert "same transaction" in text
    assert "not run here" in text  # the plain-effect and Powertools comparisons
    assert "| layer on PostgreSQL, effect in the same transaction |" in text
    lost = sum(n for name, n in run.events.items() if name.startswith("pg-fault: lose "))
    assert (
        f"| PostgreSQL replies lost (statement applied, then the connection dropped) | {lost} ("
        in text
    )
    assert "store PostgreSQL" in text


@pytest.mark.timeout(300)
def test_with_the_lock_off_the_books_find_the_double_executions(
    stack: LocalStack, tmp_path: Path
) -> None:
    """The self-test on PostgreSQL: the lock off in the workers, every repeated message runs
    and commits its row again, and the books must fail with those keys executed twice."""
    result, report = run_lock_off(stack, StoreKind.POSTGRES, tmp_path)

    assert_the_books_find_the_doubles(result, report)


def test_the_cli_offers_the_store_and_keeps_the_dynamodb_page() -> None:
    runner = CliRunner()
    assert "--store" in runner.invoke(app, ["chaos", "--help"]).output
    refused = runner.invoke(
        app, ["chaos", "--store", "postgres", "--markdown", "docs/chaos.md", "--messages", "1"]
    )
    assert refused.exit_code == 2
    unknown = runner.invoke(app, ["chaos", "--store", "postgres", "--consumers", "powertools"])
    assert unknown.exit_code == 2
