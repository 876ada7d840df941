"""`consumers`: the consumers a stack declares, with their queues (what `--consumer` accepts)."""

from __future__ import annotations

import typer
from rich.table import Table

from exactly_once_cdk.outputs import DEAD_LETTER_QUEUE_URL, FUNCTION_NAME, QUEUE_URL
from exactly_once_cli.common import CliError, StackOption, aws_target, stdout
from exactly_once_ops.targets import (
    DEFAULT_STACK,
    consumers_in,
    stack_outputs,
)


def consumers_cmd(ctx: typer.Context, stack: StackOption = DEFAULT_STACK) -> None:
    """List the stack's consumers: queue, dead-letter queue and function."""
    outputs = stack_outputs(aws_target(ctx).cloudformation(), stack)
    names = consumers_in(outputs)
    if not names:
        raise CliError(
            f"stack {stack!r} has no <Name>QueueUrl outputs: is it built from the constructs?"
        )
    table = Table(title=f"{stack}: {len(names)} consumer(s)")
    for column in ("consumer", "queue", "dead-letter queue", "function"):
        table.add_column(column)
    for name in names:
        table.add_row(
            name.lower(),
            outputs.get(f"{name}{QUEUE_URL}", "-"),
            outputs.get(f"{name}{DEAD_LETTER_QUEUE_URL}", "-"),
            outputs.get(f"{name}{FUNCTION_NAME}", "-"),
        )
    stdout().print(table)
