"""The three-step run's comparison table, per (key, step): rich for the terminal, and Markdown.

Same sections as the orders table (report.py), with the step points as the fault points and
the invariants counted per step.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fault_injection import accounting
from fault_injection.harness import ConsumerRun
from fault_injection.pg_policy import FAIL_KINDS
from fault_injection.report import Cell, Row, _pg_faults, sectioned_table, settings_line
from fault_injection.settings import ChaosSettings, StoreKind
from fault_injection.steps_books import StepsVerdict
from fault_injection.steps_workload import CRASH_POINTS, PAUSE_POINTS, STEPS
from fault_injection.workload import Plan

SHORT = {accounting.ZOMBIE: "zombie", accounting.KILLED: "killed", accounting.OVERRUN: "other"}


def sv(run: ConsumerRun) -> StepsVerdict:
    verdict = run.verdict
    if not isinstance(verdict, StepsVerdict):
        raise TypeError(f"{run.kind.name} was not accounted per step")
    return verdict


def _points(kind: str, points: tuple[str, ...]) -> Row:
    def cell(run: ConsumerRun) -> str:
        parts = ", ".join(f"{run.events[f'{kind}: {p}']} {p}" for p in points)
        return f"{run.events[kind]} ({parts})"

    label = {
        "crash": "worker kills (SIGKILL) at a planned point",
        "pause": "zombies (SIGSTOP past the lease, then SIGCONT)",
    }[kind]
    return Row(label, cell, "faults injected")


def calling(cell: Cell) -> Cell:
    """A count about calls to the outside world: "n/a" for a consumer that makes none (the
    plain column has no step and no step key to send)."""

    def guarded(run: ConsumerRun) -> object:
        return cell(run) if sv(run).provider_calls else "n/a"

    return guarded


def _step_once(step: str) -> Row:
    def cell(run: ConsumerRun) -> str:
        return f"{sv(run).steps_exactly_once[step]}/{sv(run).expected}"

    return Row(f"keys whose {step} took effect exactly once", cell, "invariants")


def _step_doubles(step: str) -> Row:
    def cell(run: ConsumerRun) -> str:
        v = sv(run)
        pairs = [pair for pair in v.step_doubles if pair[1] == step]
        return str(len(pairs))

    return Row(f"  {step}", cell, "invariants")


def _causes(run: ConsumerRun) -> str:
    causes = sv(run).double_causes
    return ", ".join(f"{n} {SHORT[c]}" for c, n in sorted(causes.items())) or "-"


def _dead_lettered(run: ConsumerRun) -> str:
    reasons = sv(run).dead_lettered
    detail = ", ".join(f"{k}: {n}" for k, n in sorted(reasons.items()))
    return f"{sum(reasons.values())}" + (f" ({detail})" if detail else "")


def _verdict(run: ConsumerRun) -> str:
    return "PASS" if run.verdict.ok and run.drained else "FAIL"


def rows(plan: Plan, store: StoreKind = StoreKind.DYNAMODB) -> list[Row]:
    faults = [
        Row("DynamoDB requests throttled", lambda r: r.events["throttle"], "faults injected"),
        Row(
            "step write replies lost (TransactWriteItems applied, reply dropped)",
            lambda r: r.events["lost-reply"],
            "faults injected",
        ),
    ]
    if store is StoreKind.POSTGRES:
        kinds = (*FAIL_KINDS, "step")  # a step's commit meets the completion's faults
        faults = [
            Row(
                "PostgreSQL connections dropped before a statement",
                _pg_faults("fail", kinds),
                "faults injected",
            ),
            Row(
                "PostgreSQL replies lost (statement applied, then the connection dropped)",
                _pg_faults("lose", kinds),
                "faults injected",
            ),
        ]
    return [
        Row("messages sent", lambda r: len(plan.messages), "workload"),
        Row("  unique business keys (three steps each)", lambda r: len(plan.keys), "workload"),
        Row("  duplicate sends (same body again)", lambda r: plan.duplicates, "workload"),
        Row("  poison messages", lambda r: plan.poison, "workload"),
        _points("crash", CRASH_POINTS),
        Row("worker processes killed and restarted", lambda r: r.pool.killed, "faults injected"),
        _points("pause", PAUSE_POINTS),
        Row("transient consumer errors raised", lambda r: r.events["transient"], "faults injected"),
        *faults,
        Row("SQS deletes dropped", lambda r: r.batches["delete_dropped"], "faults injected"),
        Row("deliveries in invocations that finished", lambda r: r.batches["received"], "observed"),
        Row("takeovers of expired leases", lambda r: r.batches["takeovers"], "observed"),
        Row(
            "steps resumed from their recovery point (not run again)",
            lambda r: r.events["step-resumed"],
            "observed",
        ),
        Row(
            "step points refused (a zombie's, or after a takeover)",
            lambda r: r.events["step-refused"],
            "observed",
        ),
        Row(
            "(key, step)s whose outside call was repeated with the same step key",
            calling(lambda r: sv(r).provider_repeats),
            "observed",
        ),
        Row("lease lost at completion", lambda r: r.outcomes["lease_lost"], "observed"),
        *[_step_once(step) for step in STEPS],
        Row(
            "keys with every step exactly once",
            lambda r: f"{sv(r).exactly_once}/{sv(r).expected}",
            "invariants",
        ),
        Row(
            "(key, step)s executed more than once", lambda r: len(sv(r).step_doubles), "invariants"
        ),
        *[_step_doubles(step) for step in STEPS],
        Row("  causes (from each extra entry's writer)", _causes, "invariants"),
        Row("keys with no step at all", lambda r: len(sv(r).missing), "invariants"),
        Row("keys with a step never run", lambda r: len(sv(r).incomplete), "invariants"),
        Row(
            "keys whose record is not COMPLETED (all steps run)",
            lambda r: len(sv(r).not_completed),
            "invariants",
        ),
        Row(
            "(key, step)s that sent the outside world two step keys",
            calling(lambda r: len(sv(r).provider_split)),
            "invariants",
        ),
        Row("messages processed (all three steps)", lambda r: sv(r).processed, "invariants"),
        Row("messages in the DLQ with a reason", _dead_lettered, "invariants"),
        Row("messages in the DLQ without a reason", lambda r: sv(r).redriven, "invariants"),
        Row("  of which valid (not poison)", lambda r: sv(r).valid_in_dlq, "invariants"),
        Row("messages lost", lambda r: len(sv(r).lost), "invariants"),
        Row("records stuck IN_PROGRESS", lambda r: len(sv(r).stuck), "invariants"),
        Row("records FAILED but retryable", lambda r: len(sv(r).retryable_failed), "invariants"),
        Row("messages left in the queue", lambda r: sv(r).left_in_queue, "invariants"),
        Row("run time (s)", lambda r: f"{r.elapsed_s:.0f}", "invariants"),
        Row("verdict", _verdict, "invariants"),
    ]


def table(plan: Plan, runs: list[ConsumerRun], title: str, store: StoreKind) -> Table:
    return sectioned_table(title, runs, rows(plan, store))


def problems(run: ConsumerRun, limit: int = 5) -> list[str]:
    """A few examples of each broken invariant, to start the investigation from."""
    v = sv(run)
    found = {
        "steps executed more than once": [f"{k}/{s}" for k, s in sorted(v.step_doubles)],
        "no step at all": sorted(v.missing),
        "a step never run": [f"{k} ({', '.join(s)})" for k, s in sorted(v.incomplete.items())],
        "not COMPLETED": v.not_completed,
        "two step keys sent out": [f"{k}/{s}" for k, s in sorted(v.provider_split)],
        "lost message ids": v.lost,
        "stuck IN_PROGRESS": v.stuck,
        "FAILED but retryable": v.retryable_failed,
    }
    return [f"{name}: {', '.join(items[:limit])}" for name, items in found.items() if items]


def steps_settings_line(settings: ChaosSettings, runs: list[ConsumerRun]) -> str:
    """report.settings_line, with the lost step replies of a DynamoDB run."""
    line = settings_line(settings, runs)
    if settings.store is StoreKind.DYNAMODB:
        line += f", lost TransactWriteItems replies {settings.rates.lost_reply}"
    else:
        line += " (a step's commit meets the completion's faults)"
    return line + "; workload: three steps per key"


def print_report(
    console: Console, settings: ChaosSettings, plan: Plan, runs: list[ConsumerRun]
) -> None:
    title = "Fault injection, three steps per key" + (
        " on PostgreSQL" if settings.store is StoreKind.POSTGRES else ""
    )
    if settings.lock_off:
        title += " (SELF-TEST: the idempotency lock is OFF, the verdict must FAIL)"
    console.print(table(plan, runs, title, settings.store))
    console.print(steps_settings_line(settings, runs))
    for run in runs:
        for line in problems(run):
            console.print(f"  {run.kind.name}: {line}", markup=False)


def markdown(settings: ChaosSettings, plan: Plan, runs: list[ConsumerRun]) -> str:
    """The table as GitHub Markdown, with the settings it was produced with."""
    lines = ["| | " + " | ".join(run.kind.title for run in runs) + " |"]
    lines.append("|---|" + "---:|" * len(runs))
    section = ""
    for row in rows(plan, settings.store):
        if row.section != section:
            section = row.section
            lines.append(f"| **{section}** |" + " |" * len(runs))
        label = (
            row.label.replace("  ", "&nbsp;&nbsp;", 1) if row.label.startswith("  ") else row.label
        )
        lines.append(f"| {label} | " + " | ".join(str(row.cell(run)) for run in runs) + " |")
    return "\n".join(lines) + "\n\n" + steps_settings_line(settings, runs) + "\n"
