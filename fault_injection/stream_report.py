"""The Kinesis run's comparison table: one column per consumer, for the terminal and Markdown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from fault_injection import accounting
from fault_injection.report import sectioned_table
from fault_injection.stream_accounting import StreamVerdict
from fault_injection.stream_harness import StreamRun
from fault_injection.stream_workload import CRASH_POINTS, PAUSE_POINTS, KinesisSettings, StreamPlan

Cell = Callable[[StreamRun], object]


@dataclass(frozen=True)
class Row:
    label: str
    cell: Cell
    section: str


def _points(kind: str, points: tuple[str, ...]) -> Cell:
    def cell(run: StreamRun) -> str:
        parts = ", ".join(f"{run.events[f'{kind}: {p}']} {p}" for p in points)
        return f"{run.events[kind]} ({parts})"

    return cell


def _doubles(run: StreamRun) -> str:
    causes = run.verdict.double_causes
    short = {accounting.ZOMBIE: "zombie", accounting.KILLED: "killed", accounting.OVERRUN: "other"}
    detail = ", ".join(f"{n} {short[c]}" for c, n in sorted(causes.items()))
    return f"{len(run.verdict.doubles)}" + (f" ({detail})" if detail else "")


def _dead_lettered(run: StreamRun) -> str:
    reasons = run.verdict.dead_lettered
    detail = ", ".join(f"{k}: {n}" for k, n in sorted(reasons.items()))
    return f"{sum(reasons.values())}" + (f" ({detail})" if detail else "")


def _order(run: StreamRun) -> str:
    v = run.verdict
    return f"{v.order_violations} of {v.order_checked}"


def verdict_word(run: StreamRun) -> str:
    return "PASS" if run.passed else "FAIL"


def v(run: StreamRun) -> StreamVerdict:
    return run.verdict


def rows(plan: StreamPlan, settings: KinesisSettings) -> list[Row]:
    w, f, o, i = "workload", "faults injected", "observed", "invariants"
    return [
        Row("records put", lambda r: len(plan.records), w),
        Row("  shards", lambda r: settings.shards, w),
        Row("  unique orders (business keys)", lambda r: len(plan.keys), w),
        Row("  producer retries (same data put again)", lambda r: plan.duplicates, w),
        Row("  poison records", lambda r: plan.poison, w),
        Row("poller kills (SIGKILL) at a planned point", _points("crash", CRASH_POINTS), f),
        Row("poller processes killed and restarted", lambda r: r.pool.killed, f),
        Row("zombies (SIGSTOP past both leases, then SIGCONT)", _points("pause", PAUSE_POINTS), f),
        Row("transient consumer errors raised", lambda r: r.events["transient"], f),
        Row("DynamoDB requests throttled", lambda r: r.events["throttle"], f),
        Row("DynamoDB replies lost (request applied)", lambda r: r.events["lost-reply"], f),
        Row("checkpoints dropped", lambda r: r.batches["checkpoint_dropped"], f),
        Row("invocations that finished", lambda r: r.batches["invocations"], o),
        Row("  records in them", lambda r: r.batches["received"], o),
        Row("shard leases taken (first takes included)", lambda r: r.events["lease-taken"], o),
        Row(
            "shard leases found lost at renewal (the poller was silent past it)",
            lambda r: r.events["lease-lost"],
            o,
        ),
        Row(
            "zombie checkpoints refused by the shard lease",
            lambda r: r.events["checkpoint-refused"],
            o,
        ),
        Row("takeovers of expired key leases", lambda r: r.batches["takeovers"], o),
        Row("zombie effects refused by the fence", lambda r: r.events["fence-refused"], o),
        Row(
            "effects found already applied (takeover after the effect)",
            lambda r: r.events["effect-already-applied"],
            o,
        ),
        Row("records skipped behind a failure in their shard", lambda r: r.outcomes["skipped"], o),
        Row("keys executed exactly once", lambda r: f"{v(r).exactly_once}/{v(r).expected}", i),
        Row("keys executed more than once", _doubles, i),
        Row("keys never executed", lambda r: len(v(r).missing), i),
        Row("orders out of their shard's sequence", _order, i),
        Row("records processed (their order took effect)", lambda r: v(r).processed, i),
        Row("records in the DLQ with a reason", _dead_lettered, i),
        Row("  of which valid (not poison)", lambda r: v(r).valid_in_dlq, i),
        Row("records lost", lambda r: len(v(r).lost), i),
        Row("records behind their shard's checkpoint", lambda r: v(r).unread, i),
        Row("records stuck IN_PROGRESS", lambda r: len(v(r).stuck), i),
        Row("records FAILED but retryable", lambda r: len(v(r).retryable_failed), i),
        Row("run time (s)", lambda r: f"{r.elapsed_s:.0f}", i),
        Row("verdict", verdict_word, i),
    ]


def settings_line(settings: KinesisSettings, runs: list[StreamRun]) -> str:
    r = settings.rates
    pause = f"{runs[0].pause_s:.0f} s" if runs else "-"
    return (
        f"{settings.records} records, seed {settings.seed}, {settings.shards} shards, "
        f"{settings.workers} pollers, batch size {settings.batch_size}, function timeout "
        f"{settings.function_timeout_s:g} s, shard lease {settings.shard_lease_s:g} s; rates: "
        f"producer retries {r.duplicates}, poison {r.poison}, transient {r.transient}, "
        f"crash {r.crash}, zombie {r.zombie} (pause {pause}), throttle {r.throttle}, "
        f"lost replies {r.lost_reply}, checkpoints dropped {r.delete_failure}"
    )


def table(plan: StreamPlan, settings: KinesisSettings, runs: list[StreamRun], title: str) -> Table:
    return sectioned_table(title, runs, rows(plan, settings))


def problems(run: StreamRun, plan: StreamPlan, limit: int = 5) -> list[str]:
    """A few examples of each broken invariant, to start the investigation from."""
    verdict = run.verdict
    moved = [f"{shard}: {key}" for shard, keys in verdict.out_of_order.items() for key in keys]
    found = {
        "executed more than once": sorted(verdict.doubles),
        "never executed": sorted(verdict.missing),
        "out of order": moved,
        "lost records (plan index)": [str(i) for i in verdict.lost],
        "stuck IN_PROGRESS": verdict.stuck,
        "FAILED but retryable": verdict.retryable_failed,
    }
    return [f"{name}: {', '.join(items[:limit])}" for name, items in found.items() if items]


def print_report(
    console: Console, settings: KinesisSettings, plan: StreamPlan, runs: list[StreamRun]
) -> None:
    title = "Fault injection on a Kinesis stream"
    if settings.lock_off:
        title += " (SELF-TEST: the idempotency lock is OFF, the verdict must FAIL)"
    console.print(table(plan, settings, runs, title))
    console.print(settings_line(settings, runs))
    for run in runs:
        for line in problems(run, plan):
            console.print(f"  {run.kind.name}: {line}", markup=False)


def markdown(settings: KinesisSettings, plan: StreamPlan, runs: list[StreamRun]) -> str:
    header = "| | " + " | ".join(run.kind.title for run in runs) + " |"
    lines = [header, "|---|" + "---:|" * len(runs)]
    section = ""
    for row in rows(plan, settings):
        if row.section != section:
            section = row.section
            lines.append(f"| **{section}** |" + " |" * len(runs))
        label = row.label
        if label.startswith("  "):
            label = label.replace("  ", "&nbsp;&nbsp;", 1)
        lines.append(f"| {label} | " + " | ".join(str(row.cell(run)) for run in runs) + " |")
    return "\n".join(lines) + "\n\n" + settings_line(settings, runs) + "\n"
