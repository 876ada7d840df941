"""docs/benchmarks.png: the report's medians as six small bar charts (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: CI and make bench run headless

import matplotlib.pyplot as plt

from benchmarks import imports
from benchmarks.calls import Case
from benchmarks.harness import Results
from benchmarks.memory import BASELINE
from benchmarks.rig import Variant
from benchmarks.targets import MAX_IMPORT_OVER_BOTO3_S

COLOURS = {Variant.LAYER: "#1f77b4", Variant.POWERTOOLS: "#ff7f0e"}
GREY = "#9e9e9e"
SHORT_VARIANT = {Variant.LAYER.value: "layer", Variant.POWERTOOLS.value: "Powertools"}
WIDTH = 0.38
SHORT = {
    imports.BARE: "bare boto3",
    imports.BARE_CLIENT: "bare boto3\n+ client",
    imports.LAYER_ONLY: "layer module\n(lazy boto3)",
    imports.LAYER: "layer module\n+ boto3",
    imports.LAYER_CLIENT: "layer module\n+ boto3 + client",
    imports.POWERTOOLS: "Powertools\nmodule",
}


def _pair(
    ax: Any, labels: list[str], layer: list[float], powertools: list[float], fmt: str = "%.0f"
) -> list[Any]:
    """Side-by-side bars for the two consumers, each labelled with its value."""
    xs = range(len(labels))
    groups = []
    for offset, variant, values in (
        (-WIDTH / 2, Variant.LAYER, layer),
        (WIDTH / 2, Variant.POWERTOOLS, powertools),
    ):
        bars = ax.bar(
            [x + offset for x in xs], values, WIDTH, color=COLOURS[variant], label=variant.label
        )
        ax.bar_label(bars, fmt=fmt, fontsize=8, padding=2)
        groups.append(bars)
    ax.set_xticks(list(xs), labels, fontsize=9)
    ax.margins(y=0.18)
    return groups


def _calls(ax: Any, results: Results) -> None:
    by = {(c.variant, c.case): c.per_batch("dynamodb") for c in results.calls}
    sqs = {c.case: c.per_batch("sqs") for c in results.calls if c.variant is Variant.LAYER}
    cases = list(Case)
    layer_bars, _ = _pair(
        ax,
        [str(c) for c in cases],
        [by[(Variant.LAYER, c)] for c in cases],
        [by[(Variant.POWERTOOLS, c)] for c in cases],
        fmt="%g",
    )
    for case, bar in zip(cases, layer_bars, strict=True):
        if sqs.get(case):
            ax.annotate(
                f"+{sqs[case]:g} SQS",
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                xytext=(0, 14),
                textcoords="offset points",
                ha="center",
                fontsize=8,
                color=COLOURS[Variant.LAYER],
            )
    ax.set_title("DynamoDB requests per batch")
    ax.margins(y=0.3)


def _wall(ax: Any, results: Results, batch: int) -> None:
    rows = [w for w in results.wall if w.scenario.batch == batch]
    ax.set_title(f"Wall time per batch of {batch} (ms)")
    if not rows:
        ax.text(0.5, 0.5, "not measured in this run", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        return
    labels = [
        ("I/O-bound" if w.scenario.io_ms else "CPU-trivial") + f"\n{w.speedup:.1f}x faster"
        for w in rows
    ]
    _pair(
        ax,
        labels,
        [w.median(Variant.LAYER) * 1000 for w in rows],
        [w.median(Variant.POWERTOOLS) * 1000 for w in rows],
    )


def _cpu(ax: Any, results: Results) -> None:
    runs = [c for c in (results.cpu, results.cpu_no_latency) if c is not None]
    latency = f"{results.settings.latency_ms:g} ms latency"
    _pair(
        ax,
        [
            f"{'with ' + latency if c.latency else 'no injected latency'}\n"
            f"layer / Powertools {c.ratio:.2f}"
            for c in runs
        ],
        [c.median(Variant.LAYER) * 1e6 for c in runs],
        [c.median(Variant.POWERTOOLS) * 1e6 for c in runs],
    )
    ax.set_title("CPU per record (us)")


def _imports(ax: Any, results: Results) -> None:
    r = results.imports
    cases = r.cases
    colours = [
        COLOURS[Variant.LAYER]
        if c.startswith("layer")
        else COLOURS[Variant.POWERTOOLS]
        if c.startswith("Powertools")
        else GREY
        for c in cases
    ]
    bars = ax.barh(
        [SHORT[c] for c in cases], [r.median_cpu(c) * 1000 for c in cases], color=colours
    )
    # A white box keeps a label readable where it meets the target line.
    box = {"facecolor": "white", "edgecolor": "none", "pad": 0.5}
    ax.bar_label(bars, fmt="%.0f", fontsize=8, padding=3, bbox=box, zorder=3)
    limit = (r.median_cpu(imports.BARE) + MAX_IMPORT_OVER_BOTO3_S) * 1000
    ax.axvline(limit, color="black", linestyle="--", linewidth=1)
    ax.annotate(
        "bare boto3\n+ 20 ms",
        (limit, 0),
        xytext=(4, 0),
        textcoords="offset points",
        fontsize=7,
        va="top",
        annotation_clip=False,
    )
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title("Cold-start import, CPU (ms)")
    ax.margins(x=0.2)


def _memory(ax: Any, results: Results) -> None:
    m = results.memory
    names = list(m.samples)
    colours = [COLOURS[Variant(n)] if n != BASELINE else GREY for n in names]
    labels = ["boto3 +\nclient" if n == BASELINE else SHORT_VARIANT[n] for n in names]
    bars = ax.bar(labels, [m.median(n) for n in names], color=colours)
    ax.bar_label(bars, fmt="%.1f", fontsize=8, padding=2)
    ax.set_title("Peak RSS of a consumer process (MiB)")
    ax.margins(y=0.18)


def draw(results: Results, path: Path) -> None:
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    _calls(axes[0][0], results)
    _wall(axes[0][1], results, 10)
    _wall(axes[0][2], results, 100)
    _cpu(axes[1][0], results)
    _imports(axes[1][1], results)
    _memory(axes[1][2], results)
    env = results.environment
    fig.suptitle(
        f"exactly_once layer vs Powertools {env['aws-lambda-powertools']}: medians, "
        f"{results.settings.latency_ms:g} ms injected per request, {env['Date (UTC)']} UTC",
        fontsize=12,
    )
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, bbox_to_anchor=(0.5, 0.955))
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)
