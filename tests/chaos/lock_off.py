"""The lock-off self-test both CI chaos runs share (DynamoDB and PostgreSQL).

The same small plan on either store: duplicates only, no other fault, and the layer's lock off
in the workers (every delivery acquires a record of its own). The books must then fail, with
each repeated message's key executed again; one plan and one set of checks, so the two stores'
self-tests cannot drift apart.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from fault_injection.consumers import by_names
from fault_injection.report import print_report
from fault_injection.runner import ChaosResult, run_chaos
from fault_injection.settings import ChaosSettings, FaultRates, StoreKind
from local_aws.local_stack import LocalStack

# Duplicates are the only fault: each one is a second execution the books must find.
ONLY_DUPLICATES = FaultRates(
    duplicates=0.3,
    poison=0.0,
    transient=0.0,
    crash=0.0,
    zombie=0.0,
    throttle=0.0,
    delete_failure=0.0,
    lost_reply=0.0,
)


def lock_off_settings(store: StoreKind) -> ChaosSettings:
    return ChaosSettings(
        messages=60,
        rates=ONLY_DUPLICATES,
        seed=11,
        workers=2,
        drain_timeout_s=120,
        store=store,
        lock_off=True,
    )


def run_lock_off(stack: LocalStack, store: StoreKind, workdir: Path) -> tuple[ChaosResult, str]:
    """The self-test's run on `store`, and its report (print_report's output alone)."""
    settings = lock_off_settings(store)
    kinds = by_names(["layer"], store)
    result = run_chaos(settings, kinds, Console(file=io.StringIO()), stack=stack, workdir=workdir)
    out = io.StringIO()
    print_report(Console(file=out, width=160), settings, result.plan, result.runs)
    return result, out.getvalue()


def assert_the_books_find_the_doubles(result: ChaosResult, report: str) -> None:
    """The run drained, and the verdict failed on double executions of planned keys only: at
    least one extra execution per planned duplicate, and no key left unexecuted."""
    [run] = result.runs
    assert "SELF-TEST: the idempotency lock is OFF" in report
    assert run.drained, report
    assert not run.verdict.ok, report
    assert run.verdict.doubles, report
    assert set(run.verdict.doubles) <= result.plan.keys, report
    assert sum(n - 1 for n in run.verdict.doubles.values()) >= result.plan.duplicates, report
    assert run.verdict.missing == set(), report
    # The report's own verdict row says so (the title's "must FAIL" does not count).
    assert re.findall(r"^\W*verdict\W+(PASS|FAIL)\b", report, re.MULTILINE) == ["FAIL"], report
