"""Deploy the local stack once and run each consumer under test through the same plan."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from fault_injection.consumers import ConsumerKind
from fault_injection.harness import ConsumerRun, run_consumer
from fault_injection.settings import DEPLOY_CONTEXT, ChaosSettings, StoreKind, Workload
from fault_injection.steps_workload import plan_steps
from fault_injection.workload import Plan, plan_run
from local_aws.local_postgres import LocalPostgres
from local_aws.local_stack import LocalStack


@dataclass
class ChaosResult:
    settings: ChaosSettings
    plan: Plan
    runs: list[ConsumerRun] = field(default_factory=list)
    store_version: str = ""  # the PostgreSQL server's, on a PostgreSQL run

    def run(self, name: str) -> ConsumerRun | None:
        return next((r for r in self.runs if r.kind.name == name), None)


def postgres(settings: ChaosSettings) -> LocalPostgres | None:
    """The stack's PostgreSQL server on a PostgreSQL run; each consumer gets a database in it.

    fsync is off: the run kills and freezes the workers, never the server, so durability
    across a server crash is not what it measures (and DynamoDB Local keeps nothing either).
    """
    return LocalPostgres(fsync=False) if settings.store is StoreKind.POSTGRES else None


def server_version(stack: LocalStack) -> str:
    """The stack's PostgreSQL server version ("16.2"), or "" without one."""
    if stack.postgres is None:
        return ""
    import psycopg

    with psycopg.connect(stack.postgres.dsn) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else ""


def run_chaos(
    settings: ChaosSettings,
    kinds: list[ConsumerKind],
    console: Console,
    stack: LocalStack | None = None,
    workdir: Path | None = None,
) -> ChaosResult:
    """Run every consumer in turn; on a stack of its own unless one is given (left running)."""
    plan = plan_steps(settings) if settings.workload is Workload.STEPS else plan_run(settings)
    result = ChaosResult(settings, plan)
    own = stack is None
    if stack is None:
        started = time.monotonic()
        starting = " and PostgreSQL" if settings.store is StoreKind.POSTGRES else ""
        with console.status(
            f"Starting moto and DynamoDB Local{starting}, deploying the CDK app..."
        ):
            stack = LocalStack(context=dict(DEPLOY_CONTEXT), postgres=postgres(settings)).start()
        console.print(f"[green]✓[/] stack deployed in {time.monotonic() - started:.0f}s")
    try:
        result.store_version = server_version(stack)
        base = workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
        for kind in kinds:
            with console.status(f"{kind.name}: starting workers") as status:
                run = run_consumer(
                    stack,
                    kind,
                    result.plan,
                    settings,
                    base,
                    lambda text, s=status: s.update(text),  # type: ignore[misc]
                )
            verdict = "[green]PASS[/]" if run.verdict.ok and run.drained else "[red]FAIL[/]"
            console.print(f"{verdict} {kind.title}: {run.elapsed_s:.0f}s (logs in {base})")
            result.runs.append(run)
    finally:
        if own:
            stack.stop()
    return result
