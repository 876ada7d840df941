"""Deploy the local stack once and run each consumer under test through the same plan."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from fault_injection.consumers import ConsumerKind
from fault_injection.harness import ConsumerRun, run_consumer
from fault_injection.settings import DEPLOY_CONTEXT, ChaosSettings
from fault_injection.workload import Plan, plan_run
from local_aws.local_stack import LocalStack


@dataclass
class ChaosResult:
    settings: ChaosSettings
    plan: Plan
    runs: list[ConsumerRun] = field(default_factory=list)

    def run(self, name: str) -> ConsumerRun | None:
        return next((r for r in self.runs if r.kind.name == name), None)


def run_chaos(
    settings: ChaosSettings,
    kinds: list[ConsumerKind],
    console: Console,
    stack: LocalStack | None = None,
    workdir: Path | None = None,
) -> ChaosResult:
    """Run every consumer in turn; on a stack of its own unless one is given (left running)."""
    result = ChaosResult(settings, plan_run(settings))
    own = stack is None
    if stack is None:
        started = time.monotonic()
        with console.status("Starting moto and DynamoDB Local, deploying the CDK app..."):
            stack = LocalStack(context=dict(DEPLOY_CONTEXT)).start()
        console.print(f"[green]✓[/] stack deployed in {time.monotonic() - started:.0f}s")
    try:
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
