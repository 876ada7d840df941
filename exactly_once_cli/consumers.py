"""`consumers`: the consumers a stack declares, with their queues (what `--consumer` accepts),
then its stream consumers (Kinesis, DynamoDB Streams, Kafka: what `eonce invoke` also runs)."""

from __future__ import annotations

from collections.abc import Mapping

import typer
from rich.table import Table

from exactly_once_cdk.outputs import (
    DEAD_LETTER_QUEUE_ARN,
    DEAD_LETTER_QUEUE_URL,
    FUNCTION_NAME,
    ON_FAILURE_QUEUE_ARN,
    QUEUE_URL,
    STREAM_NAME,
)
from exactly_once_cli.common import CliError, StackOption, aws_target, stdout
from exactly_once_ops.targets import (
    DEFAULT_STACK,
    consumers_in,
    stack_outputs,
    stream_consumers_in,
)


def consumers_cmd(ctx: typer.Context, stack: StackOption = DEFAULT_STACK) -> None:
    """List the stack's consumers: queue, dead-letter queue and function; then its stream
    consumers: stream, dead-letter and on-failure queues, and function."""
    outputs = stack_outputs(aws_target(ctx).cloudformation(), stack)
    names = consumers_in(outputs)
    streams = stream_consumers_in(outputs)
    if not names and not streams:
        raise CliError(
            f"stack {stack!r} has no <Name>QueueUrl outputs: is it built from the constructs?"
        )
    if names:
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
    if streams:
        stdout().print(stream_table(stack, streams, outputs))


def stream_table(stack: str, names: list[str], outputs: Mapping[str, str]) -> Table:
    """The stream consumers; a Kafka or DynamoDB Streams consumer's source is not an output
    (its stream column is "-"). Their dead-letter queue gets the records the handler gives up,
    the on-failure queue the batches the event source mapping gives up."""
    table = Table(title=f"{stack}: {len(names)} stream consumer(s)")
    for column in (
        "stream consumer",
        "stream",
        "dead-letter queue",
        "on-failure queue",
        "function",
    ):
        table.add_column(column)
    for name in names:
        table.add_row(
            name.lower(),
            outputs.get(f"{name}{STREAM_NAME}", "-"),
            outputs.get(f"{name}{DEAD_LETTER_QUEUE_ARN}", "-"),
            outputs.get(f"{name}{ON_FAILURE_QUEUE_ARN}", "-"),
            outputs.get(f"{name}{FUNCTION_NAME}", "-"),
        )
    return table
