"""The comparison table: one column per consumer, as rich for the terminal and as Markdown."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from fault_injection import accounting, injection
from fault_injection.consumers import Library
from fault_injection.harness import ConsumerRun
from fault_injection.pg_policy import FAIL_KINDS, LOSE_KINDS
from fault_injection.settings import ChaosSettings, StoreKind
from fault_injection.workload import Plan

Cell = Callable[[ConsumerRun], object]


@dataclass(frozen=True)
class Row:
    label: str
    cell: Cell
    section: str = ""


def _points(kind: str, points: tuple[str, ...]) -> Cell:
    def cell(run: ConsumerRun) -> str:
        parts = ", ".join(f"{run.events[f'{kind}: {p}']} {p}" for p in points)
        return f"{run.events[kind]} ({parts})"

    return cell


def _pg_faults(fault: str, kinds: tuple[str, ...]) -> Cell:
    """Faults applied at the PostgreSQL driver's edge, by statement kind."""

    def cell(run: ConsumerRun) -> str:
        counts = {k: run.events[f"pg-fault: {fault} {k}"] for k in kinds}
        parts = ", ".join(f"{n} {k}" for k, n in counts.items())
        return f"{sum(counts.values())} ({parts})"

    return cell


def _doubles(run: ConsumerRun) -> str:
    causes = run.verdict.double_causes
    short = {accounting.ZOMBIE: "zombie", accounting.KILLED: "killed", accounting.OVERRUN: "other"}
    detail = ", ".join(f"{n} {short[c]}" for c, n in sorted(causes.items()))
    return f"{len(run.verdict.doubles)}" + (f" ({detail})" if detail else "")


def _dead_lettered(run: ConsumerRun) -> str:
    reasons = run.verdict.dead_lettered
    detail = ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items()))
    return f"{sum(reasons.values())}" + (f" ({detail})" if detail else "")


def _verdict(run: ConsumerRun) -> str:
    return "PASS" if run.verdict.ok and run.drained else "FAIL"


def layer_only(cell: Cell) -> Cell:
    """Counters only the layer reports (Powertools has no takeovers, fences or outcomes)."""

    def guarded(run: ConsumerRun) -> object:
        return cell(run) if run.kind.library is Library.LAYER else "n/a"

    return guarded


def v(run: ConsumerRun) -> accounting.Verdict:
    return run.verdict


def rows(plan: Plan, store: StoreKind = StoreKind.DYNAMODB) -> list[Row]:
    return [
        Row("messages sent", lambda r: len(plan.messages), "workload"),
        Row("  unique business keys", lambda r: len(plan.keys), "workload"),
        Row("  duplicate sends (same body again)", lambda r: plan.duplicates, "workload"),
        Row("  poison messages", lambda r: plan.poison, "workload"),
        Row(
            "worker kills (SIGKILL) at a planned point",
            _points("crash", injection.CRASH_POINTS),
            "faults injected",
        ),
        Row("worker processes killed and restarted", lambda r: r.pool.killed, "faults injected"),
        Row(
            "zombies (SIGSTOP past the lease, then SIGCONT)",
            _points("pause", injection.PAUSE_POINTS),
            "faults injected",
        ),
        Row("transient consumer errors raised", lambda r: r.events["transient"], "faults injected"),
        *(_postgres_faults() if store is StoreKind.POSTGRES else _dynamodb_faults()),
        Row("SQS deletes dropped", lambda r: r.batches["delete_dropped"], "faults injected"),
        Row("deliveries in invocations that finished", lambda r: r.batches["received"], "observed"),
        Row(
            "takeovers of expired leases",
            layer_only(lambda r: r.batches["takeovers"]),
            "observed",
        ),
        *(_postgres_observed() if store is StoreKind.POSTGRES else _dynamodb_observed()),
        Row(
            "keys executed exactly once",
            lambda r: f"{v(r).exactly_once}/{v(r).expected}",
            "invariants",
        ),
        Row("keys executed more than once", _doubles, "invariants"),
        Row("keys never executed", lambda r: len(v(r).missing), "invariants"),
        Row("messages processed (their key took effect)", lambda r: v(r).processed, "invariants"),
        Row("messages in the DLQ with a reason", _dead_lettered, "invariants"),
        Row("messages in the DLQ without a reason", lambda r: v(r).redriven, "invariants"),
        Row("  of which valid (not poison)", lambda r: v(r).valid_in_dlq, "invariants"),
        Row("messages lost", lambda r: len(v(r).lost), "invariants"),
        Row("records stuck IN_PROGRESS", lambda r: len(v(r).stuck), "invariants"),
        Row("records FAILED but retryable", lambda r: len(v(r).retryable_failed), "invariants"),
        Row("messages left in the queue", lambda r: v(r).left_in_queue, "invariants"),
        Row("run time (s)", lambda r: f"{r.elapsed_s:.0f}", "invariants"),
        Row("verdict", _verdict, "invariants"),
    ]


def _dynamodb_faults() -> list[Row]:
    return [Row("DynamoDB requests throttled", lambda r: r.events["throttle"], "faults injected")]


def _postgres_faults() -> list[Row]:
    return [
        Row(
            "PostgreSQL connections dropped before a statement",
            _pg_faults("fail", FAIL_KINDS),
            "faults injected",
        ),
        Row(
            "PostgreSQL replies lost (statement applied, then the connection dropped)",
            _pg_faults("lose", LOSE_KINDS),
            "faults injected",
        ),
    ]


def _dynamodb_observed() -> list[Row]:
    return [
        Row(
            "zombie effects refused by the fence",
            layer_only(lambda r: r.events["fence-refused"]),
            "observed",
        ),
        Row(
            "effects found already applied (crash after effect)",
            layer_only(lambda r: r.events["effect-already-applied"]),
            "observed",
        ),
        Row(
            "lease lost at completion",
            layer_only(lambda r: r.outcomes["lease_lost"]),
            "observed",
        ),
    ]


def _postgres_observed() -> list[Row]:
    return [
        Row(
            "lease lost at completion (its transaction, effect included, rolled back)",
            layer_only(lambda r: r.outcomes["lease_lost"]),
            "observed",
        ),
    ]


def settings_line(settings: ChaosSettings, runs: list[ConsumerRun]) -> str:
    r = settings.rates
    pause = f"{runs[0].pause_s:.0f} s" if runs else "-"
    head = (
        f"{settings.messages} messages, seed {settings.seed}, {settings.workers} workers; "
        f"rates: duplicates {r.duplicates}, poison {r.poison}, transient {r.transient}, "
        f"crash {r.crash}, zombie {r.zombie} (pause {pause}), "
    )
    if settings.store is StoreKind.POSTGRES:
        return head + (
            f"connection drops {r.throttle} (of {', '.join(FAIL_KINDS)} statements), "
            f"lost replies {r.lost_reply} (of {', '.join(LOSE_KINDS)} statements), "
            f"delete failure {r.delete_failure}; store PostgreSQL"
        )
    return head + f"throttle {r.throttle}, delete failure {r.delete_failure}"


def sectioned_table(title: str, runs: Sequence[Any], rows: Iterable[Any]) -> Table:
    """The comparison table: a column per run (its kind's title), rows grouped under their
    sections' headings; each row is a label, a section and a cell(run). Every chaos report
    (queue, steps, stream) draws its rows this way."""
    out = Table(title=title, show_header=True, header_style="bold")
    out.add_column("")
    for run in runs:
        out.add_column(run.kind.title, justify="right")
    section = ""
    for row in rows:
        if row.section != section:
            section = row.section
            out.add_section()
            out.add_row(f"[bold]{section}[/]", *["" for _ in runs])
        out.add_row(row.label, *[str(row.cell(run)) for run in runs])
    return out


def table(
    plan: Plan, runs: list[ConsumerRun], title: str, store: StoreKind = StoreKind.DYNAMODB
) -> Table:
    return sectioned_table(title, runs, rows(plan, store))


def problems(run: ConsumerRun, limit: int = 5) -> list[str]:
    """A few examples of each broken invariant, to start the investigation from."""
    verdict = run.verdict
    found = {
        "executed more than once": sorted(verdict.doubles),
        "never executed": sorted(verdict.missing),
        "lost message ids": verdict.lost,
        "stuck IN_PROGRESS": verdict.stuck,
        "FAILED but retryable": verdict.retryable_failed,
    }
    return [f"{name}: {', '.join(items[:limit])}" for name, items in found.items() if items]


def print_report(
    console: Console, settings: ChaosSettings, plan: Plan, runs: list[ConsumerRun]
) -> None:
    title = "Fault injection" + (" on PostgreSQL" if settings.store is StoreKind.POSTGRES else "")
    if settings.lock_off:
        title += " (SELF-TEST: the idempotency lock is OFF, the verdict must FAIL)"
    console.print(table(plan, runs, title, settings.store))
    console.print(settings_line(settings, runs))
    for run in runs:
        for line in problems(run):
            console.print(f"  {run.kind.name}: {line}", markup=False)


def markdown(settings: ChaosSettings, plan: Plan, runs: list[ConsumerRun]) -> str:
    """The table as GitHub Markdown, with the settings it was produced with."""
    header = "| | " + " | ".join(run.kind.title for run in runs) + " |"
    lines = [header, "|---|" + "---:|" * len(runs)]
    section = ""
    for row in rows(plan, settings.store):
        if row.section != section:
            section = row.section
            lines.append(f"| **{section}** |" + " |" * len(runs))
        label = (
            row.label.replace("  ", "&nbsp;&nbsp;", 1) if row.label.startswith("  ") else row.label
        )
        lines.append(f"| {label} | " + " | ".join(str(row.cell(run)) for run in runs) + " |")
    return "\n".join(lines) + "\n\n" + settings_line(settings, runs) + "\n"
