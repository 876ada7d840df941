"""`send`: put messages on a consumer's queue (inline, file, JSONL or generated, duplicates)."""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Annotated

import typer

from exactly_once_cli.common import CliError, StackOption, aws_target
from exactly_once_cli.outgoing import SEND, deliver_and_report
from exactly_once_ops.message_attributes import parse_attributes
from exactly_once_ops.send import send_messages
from exactly_once_ops.targets import DEFAULT_STACK, content_based_dedup, is_fifo, resolve_queue_url
from exactly_once_ops.workload import (
    DEFAULT_GROUP_FIELDS,
    DEFAULT_TEMPLATES,
    build_messages,
    duplicate_count,
    generate_bodies,
    read_jsonl,
    with_duplicates,
)

# The options that feed `collect_bodies`, worded alike for `send` and `publish`.
BodyOption = Annotated[list[str] | None, typer.Option(help="A message body (repeat for several).")]
CountOption = Annotated[
    int | None, typer.Option(help="Generate this many bodies from --template.", min=1)
]
KeyPrefixOption = Annotated[
    str | None, typer.Option(help="Prefix of generated ids (default: random per run).")
]
GroupsOption = Annotated[int, typer.Option(help="Distinct {group} values.", min=1)]
SeedOption = Annotated[int | None, typer.Option(help="Seed for where duplicates go.")]
AttributeOption = Annotated[
    list[str] | None,
    typer.Option(help="Message attribute Name=Value, Name:Number=5 or Name:Binary=<b64>."),
]


def default_template(consumer: str | None) -> str:
    """The sample consumers' body shapes; any other consumer's bodies need --template."""
    if consumer is None:
        return DEFAULT_TEMPLATES["orders"]
    found = DEFAULT_TEMPLATES.get(consumer.lower())
    if found is None:
        raise CliError(
            f"--count for {consumer!r} needs --template (its body shape, e.g. "
            f'\'{{"id": "{{id}}"}}\'); built-in templates: {", ".join(DEFAULT_TEMPLATES)}'
        )
    return found


def collect_bodies(
    *,
    body: list[str],
    file: Path | None,
    jsonl: Path | None,
    template: str | None,
    count: int | None,
    consumer: str | None,
    key_prefix: str | None,
    groups: int,
    duplicates: float,
    rng: random.Random,
) -> tuple[list[str], str | None]:
    """The bodies to send, from exactly one source, with the requested share of duplicates,
    and the key prefix of generated ones (None for given bodies).
    """
    given = sum((bool(body), file is not None, jsonl is not None))
    generated = template is not None or count is not None
    if given + generated != 1:
        raise CliError("give exactly one of --body, --file, --jsonl or --count/--template")
    if generated:
        prefix = key_prefix if key_prefix is not None else f"{uuid.uuid4().hex[:8]}-"
        chosen = template or default_template(consumer)
        generated_bodies = generate_bodies(
            chosen,
            count if count is not None else 1,
            key_prefix=prefix,
            groups=groups,
            duplicates=duplicates,
            rng=rng,
        )
        return generated_bodies, prefix
    if file is not None:
        bodies = [file.read_text(encoding="utf-8").rstrip("\n")]
    elif jsonl is not None:
        bodies = read_jsonl(jsonl)
        if not bodies:
            raise CliError(f"{jsonl}: no bodies in file")
    else:
        bodies = list(body)
    return with_duplicates(bodies, duplicate_count(len(bodies), duplicates), rng), None


def send_cmd(
    ctx: typer.Context,
    queue_url: Annotated[str | None, typer.Option(help="Queue URL (else from the stack).")] = None,
    consumer: Annotated[
        str | None,
        typer.Option(help="A consumer of the stack (see `eonce consumers`)."),
    ] = None,
    stack: StackOption = DEFAULT_STACK,
    body: BodyOption = None,
    file: Annotated[
        Path | None, typer.Option(help="Send the file's content as one body.", dir_okay=False)
    ] = None,
    jsonl: Annotated[
        Path | None, typer.Option(help="Send one body per line of a JSONL file.", dir_okay=False)
    ] = None,
    count: CountOption = None,
    template: Annotated[
        str | None,
        typer.Option(
            help="Body template: {id} = key prefix + index (the business id), {index}, "
            "{group} = index modulo --groups. Default depends on --consumer."
        ),
    ] = None,
    key_prefix: KeyPrefixOption = None,
    groups: GroupsOption = 1,
    duplicates: Annotated[
        float,
        typer.Option(help="Share of messages that re-send an earlier body (same business id)."),
    ] = 0.0,
    seed: SeedOption = None,
    attribute: AttributeOption = None,
    group_id: Annotated[str | None, typer.Option(help="FIFO MessageGroupId for all.")] = None,
    group_field: Annotated[
        str | None,
        typer.Option(
            help="FIFO: take MessageGroupId from this body field (default with --consumer "
            "payments and the default template: accountId)."
        ),
    ] = None,
    dedup_id: Annotated[
        str | None,
        typer.Option(
            help="FIFO MessageDeduplicationId ({index} = message index). Default: the queue's "
            "content-based dedup, else a fresh id per message."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Parallel SendMessageBatch calls.", min=1)] = 4,
    ids_out: Annotated[
        Path | None,
        typer.Option(
            help="Write a JSON line per sent message: index, messageId, body (JSONL).",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Send messages to a queue with SendMessageBatch (10 per call) and report each failure.

    Exits 1 if any message was not accepted, 130 on Ctrl-C (after saying how many were sent).
    """
    target = aws_target(ctx)
    # first: a misspelt --consumer is named as such, not blamed on the body options
    url = resolve_queue_url(target, queue_url=queue_url, consumer=consumer, stack=stack)
    rng = random.Random(seed)
    try:
        bodies, prefix = collect_bodies(
            body=body or [],
            file=file,
            jsonl=jsonl,
            template=template,
            count=count,
            consumer=consumer,
            key_prefix=key_prefix,
            groups=groups,
            duplicates=duplicates,
            rng=rng,
        )
        attributes = parse_attributes(attribute or [])
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    if template is None and count is not None and not (group_id or group_field):
        group_field = DEFAULT_GROUP_FIELDS.get((consumer or "").lower())
    sqs = target.sqs()
    fifo = is_fifo(url)
    # Also proves the queue exists before any batch is sent.
    content_based = content_based_dedup(sqs, url)
    try:
        messages = build_messages(
            bodies,
            attributes=attributes,
            fifo=fifo,
            content_based_dedup=content_based,
            run_id=uuid.uuid4().hex,
            group_id=group_id,
            group_field=group_field,
            dedup_id=dedup_id,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    deliver_and_report(
        SEND,
        lambda on_batch: send_messages(
            sqs, url, messages, concurrency=concurrency, on_batch=on_batch
        ),
        messages,
        destination=url,
        key_prefix=prefix,
        ids_out=ids_out,
    )
