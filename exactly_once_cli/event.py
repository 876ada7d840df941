"""`event` and `event-samples`: write Lambda SQS (and sample API and SNS) events for local
invokes and tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from exactly_once_cli.common import CliError, aws_target, stdout
from exactly_once_ops.message_attributes import parse_attribute
from exactly_once_ops.sample_events import Attr, render, sqs_event, write_samples
from exactly_once_ops.workload import read_jsonl


def _attr(spec: str) -> tuple[str, Attr]:
    """`Name=Value` / `Name:Type=Value` as an event attribute (binary stays raw bytes)."""
    name, value = parse_attribute(spec)
    raw = value.get("BinaryValue")
    if isinstance(raw, bytes):
        return name, Attr(value["DataType"], raw)
    return name, Attr(value["DataType"], value.get("StringValue", ""))


def event_cmd(
    ctx: typer.Context,
    body: Annotated[list[str] | None, typer.Option(help="A record body (repeat).")] = None,
    file: Annotated[
        Path | None, typer.Option(help="One record whose body is the file.", dir_okay=False)
    ] = None,
    jsonl: Annotated[
        Path | None, typer.Option(help="One record per JSONL line.", dir_okay=False)
    ] = None,
    queue: Annotated[
        str, typer.Option(help="Queue name; a name ending in .fifo makes FIFO records.")
    ] = "orders-queue",
    group_id: Annotated[
        list[str] | None, typer.Option(help="FIFO group: once for all records, or one per body.")
    ] = None,
    dedup_id: Annotated[
        list[str] | None, typer.Option(help="FIFO dedup id per body (default: sha256 of body).")
    ] = None,
    attribute: Annotated[
        list[str] | None,
        typer.Option(help="Attribute for every record: Name=Value or Name:Number=5 (repeat)."),
    ] = None,
    receive_count: Annotated[int, typer.Option(help="ApproximateReceiveCount.", min=1)] = 1,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Print a Lambda SQS event (the exact shape the event source mapping sends).

    Its records' awsRegion and ARN use the global region rule (--region, AWS_REGION, ...).
    """
    sources = [bool(body), file is not None, jsonl is not None]
    if sum(sources) != 1:
        raise CliError("give exactly one of --body, --file or --jsonl")
    try:
        if file is not None:
            bodies = [file.read_text(encoding="utf-8").rstrip("\n")]
        elif jsonl is not None:
            bodies = read_jsonl(jsonl)
        else:
            bodies = list(body or [])
        attributes = dict(_attr(spec) for spec in attribute or [])
        groups = group_id or None
        event = sqs_event(
            bodies,
            queue_name=queue,
            group_ids=groups[0] if groups and len(groups) == 1 else groups,
            dedup_ids=dedup_id or None,
            attributes=attributes,
            receive_count=receive_count,
            region=aws_target(ctx).region_name,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    if output is None:
        typer.echo(json.dumps(event, indent=2))
    else:
        output.write_text(render(event), encoding="utf-8")


def event_samples_cmd(
    directory: Annotated[Path, typer.Argument(help="Where to write them.")] = Path("events"),
) -> None:
    """(Re)write the committed sample events: SQS (orders, duplicates, FIFO, poison, attributes,
    an SNS envelope), API Gateway, SNS (a sale, attributes, published twice, poison) and streams
    (Kinesis orders and poison, a DynamoDB table stream)."""
    for path in write_samples(directory):
        stdout().print(f"wrote {path}", markup=False)
