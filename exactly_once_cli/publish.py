"""`publish`: put messages on a topic (inline, file, JSONL or generated, duplicates), like `send`.

The topic is named by ARN or by the stack's id for it (`--topic sales` reads the stack's
`SalesTopicArn` output), so the same command works against the local stack and a real account.
A duplicate publishes an earlier body again: a new SNS MessageId with the same business key,
which every subscriber must absorb.
"""

from __future__ import annotations

import random
import uuid
from pathlib import Path
from typing import Annotated

import typer

from exactly_once_cli.common import CliError, StackOption, aws_target
from exactly_once_cli.outgoing import PUBLISH, deliver_and_report
from exactly_once_cli.send import (
    AttributeOption,
    BodyOption,
    CountOption,
    GroupsOption,
    KeyPrefixOption,
    SeedOption,
    collect_bodies,
)
from exactly_once_ops.message_attributes import parse_attributes
from exactly_once_ops.publish import is_fifo_topic, publish_messages
from exactly_once_ops.send import OutgoingMessage
from exactly_once_ops.targets import DEFAULT_STACK, resolve_topic_arn


def fifo_fields(
    topic_arn: str, count: int, group_id: str | None, dedup_id: str | None
) -> tuple[str | None, list[str | None]]:
    """A FIFO topic's group id (required) and a dedup id per message (given, else fresh)."""
    if not is_fifo_topic(topic_arn):
        if group_id or dedup_id:
            raise CliError("--group-id and --dedup-id are for FIFO topics (ARN ending in .fifo)")
        return None, [None] * count
    if not group_id:
        raise CliError("a FIFO topic needs --group-id")
    if dedup_id is not None:
        return group_id, [dedup_id.replace("{index}", str(i)) for i in range(count)]
    return group_id, [uuid.uuid4().hex for _ in range(count)]


def publish_cmd(
    ctx: typer.Context,
    topic_arn: Annotated[str | None, typer.Option(help="Topic ARN (else from the stack).")] = None,
    topic: Annotated[
        str | None, typer.Option(help="A topic of the stack, by its id: sales (SalesTopicArn).")
    ] = None,
    stack: StackOption = DEFAULT_STACK,
    body: BodyOption = None,
    file: Annotated[
        Path | None, typer.Option(help="Publish the file's content as one message.", dir_okay=False)
    ] = None,
    jsonl: Annotated[
        Path | None,
        typer.Option(help="Publish one message per line of a JSONL file.", dir_okay=False),
    ] = None,
    count: CountOption = None,
    template: Annotated[
        str | None,
        typer.Option(
            help="Body template: {id} = key prefix + index (the business id), {index}, "
            "{group} = index modulo --groups. Default for --topic sales: a sale."
        ),
    ] = None,
    key_prefix: KeyPrefixOption = None,
    groups: GroupsOption = 1,
    duplicates: Annotated[
        float,
        typer.Option(help="Share of messages that publish an earlier body again (same key)."),
    ] = 0.0,
    seed: SeedOption = None,
    attribute: AttributeOption = None,
    subject: Annotated[str | None, typer.Option(help="The SNS Subject of every message.")] = None,
    group_id: Annotated[str | None, typer.Option(help="FIFO topic: MessageGroupId.")] = None,
    dedup_id: Annotated[
        str | None,
        typer.Option(help="FIFO topic: MessageDeduplicationId ({index} = message index)."),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Parallel PublishBatch calls.", min=1)] = 4,
    ids_out: Annotated[
        Path | None,
        typer.Option(
            help="Write a JSON line per published message: index, messageId, body (JSONL).",
            dir_okay=False,
        ),
    ] = None,
) -> None:
    """Publish messages to a topic with PublishBatch (10 per call) and report each failure.

    Exits 1 if any message was not accepted, 130 on Ctrl-C (after saying how many were
    published).
    """
    target = aws_target(ctx)
    rng = random.Random(seed)
    try:
        bodies, prefix = collect_bodies(
            body=body or [],
            file=file,
            jsonl=jsonl,
            template=template,
            count=count,
            consumer=topic,
            key_prefix=key_prefix,
            groups=groups,
            duplicates=duplicates,
            rng=rng,
        )
        attributes = parse_attributes(attribute or [])
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    if subject is not None and not subject.strip():
        raise CliError("--subject cannot be empty")
    arn = resolve_topic_arn(target, topic_arn=topic_arn, topic=topic, stack=stack)
    group, dedup_ids = fifo_fields(arn, len(bodies), group_id, dedup_id)
    messages = [
        OutgoingMessage(body=text, attributes=attributes, group_id=group, dedup_id=dedup)
        for text, dedup in zip(bodies, dedup_ids, strict=True)
    ]
    sns = target.client("sns")
    deliver_and_report(
        PUBLISH,
        lambda on_batch: publish_messages(
            sns, arn, messages, subject=subject, concurrency=concurrency, on_batch=on_batch
        ),
        messages,
        destination=arn,
        key_prefix=prefix,
        ids_out=ids_out,
    )
