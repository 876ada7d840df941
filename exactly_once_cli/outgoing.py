"""What `send` and `publish` share once their messages are built: the run behind a progress bar,
Ctrl-C, `--ids-out`, the report and the exit code.

The two differ only in their words (send/sending/sent to a queue, publish/publishing/published
to a topic) and in the call that moves a batch, which each passes in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from exactly_once_cli.common import progress_bar, stderr, stdout
from exactly_once_ops.send import OutgoingMessage, SendInterrupted, SendReport, sent_lines

MAX_FAILURES_SHOWN = 50
INTERRUPTED_EXIT = 130
"""128 + SIGINT, what a shell reports for a command stopped with Ctrl-C."""


@dataclass(frozen=True)
class Words:
    """How a command speaks of what it does and where to."""

    verb: str  # "send": the report's title and the progress task
    doing: str  # "sending"
    done: str  # "sent"
    destination: str  # "queue": the report's row naming the URL or ARN


SEND = Words(verb="send", doing="sending", done="sent", destination="queue")
PUBLISH = Words(verb="publish", doing="publishing", done="published", destination="topic")

Deliver = Callable[[Callable[[int], None]], SendReport]
"""Moves every message, calling its argument with each batch's size (`send_messages`,
`publish_messages` with `on_batch`); raises `SendInterrupted` on Ctrl-C."""


def print_report(
    words: Words, report: SendReport, total: int, destination: str, key_prefix: str | None
) -> None:
    """Summary table, then failed entries one per line (entry id = index of the message)."""
    out = stdout()
    table = Table(title=words.verb, show_header=False)
    table.add_row(words.destination, escape(destination))
    if key_prefix is not None:
        table.add_row("key prefix", escape(key_prefix))
    table.add_row("messages", str(total))
    table.add_row(words.done, f"[green]{report.sent}[/]")
    table.add_row("failed", f"[red]{len(report.failed)}[/]" if report.failed else "0")
    table.add_row("elapsed", f"{report.elapsed_s:.2f} s")
    table.add_row("throughput", f"{report.throughput:.1f} msg/s")
    out.print(table)
    for failure in report.failed[:MAX_FAILURES_SHOWN]:
        out.print(f"failed entry {failure.id}: {failure.code}: {failure.message}", markup=False)
    if len(report.failed) > MAX_FAILURES_SHOWN:
        out.print(f"... and {len(report.failed) - MAX_FAILURES_SHOWN} more failed entries")


def deliver_and_report(
    words: Words,
    deliver: Deliver,
    messages: Sequence[OutgoingMessage],
    *,
    destination: str,
    key_prefix: str | None,
    ids_out: Path | None,
) -> None:
    """Run `deliver` behind a progress bar, write `--ids-out`, report; exit 1 if any message
    was not accepted, 130 on Ctrl-C (after saying how many went out)."""
    with ExitStack() as cleanup:
        # opened before anything goes out, so a bad path costs nothing
        ids_file = cleanup.enter_context(ids_out.open("w", encoding="utf-8")) if ids_out else None
        where = f"to {destination}" + (
            f" (key prefix {key_prefix})" if key_prefix is not None else ""
        )
        stderr().print(f"{words.doing} {len(messages)} message(s) {where}", markup=False)
        interrupted = False
        try:
            with progress_bar(words.doing) as progress:
                task = progress.add_task(words.verb, total=len(messages))
                report = deliver(lambda n: progress.advance(task, n))
        except SendInterrupted as stop:
            report, interrupted = stop.report, True
        if ids_file is not None:
            ids_file.writelines(line + "\n" for line in sent_lines(report, messages))
    if interrupted:
        failed = f", {len(report.failed)} failed" if report.failed else ""
        saved = f"; their ids are in {ids_out}" if ids_out else ""
        stderr().print(
            f"interrupted: {report.sent} of {len(messages)} message(s) {words.done}{failed}{saved}",
            markup=False,
        )
        raise typer.Exit(INTERRUPTED_EXIT)
    print_report(words, report, len(messages), destination, key_prefix)
    if report.failed:
        raise typer.Exit(1)
