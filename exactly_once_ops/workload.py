"""Message bodies for `send`: read from files, generated from a template, salted with duplicates.

Duplicates re-send an earlier body verbatim (same business id, new SQS message), which is the
traffic an exactly-once consumer must absorb.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from exactly_once_ops.send import OutgoingMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

DEFAULT_TEMPLATES = {
    "orders": '{"orderId": "{id}", "amount": 10}',
    "payments": '{"paymentId": "{id}", "accountId": "acct-{group}", "amount": 5}',
    "sales": '{"orderId": "{id}", "amount": 10}',  # the Sales topic's (`publish --topic sales`)
}
DEFAULT_GROUP_FIELDS = {"payments": "accountId"}
"""The FIFO message group of a consumer's default template (payments are ordered per account)."""


def read_jsonl(path: Path) -> list[str]:
    """One body per non-blank line; each line must be valid JSON (its text is sent as is)."""
    bodies: list[str] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        bodies.append(line)
    return bodies


def fill_template(template: str, *, index: int, key_prefix: str, groups: int) -> str:
    """Replace `{id}` (prefix + index), `{index}` and `{group}` (index modulo `groups`).

    Plain replacement rather than str.format, because the template is JSON full of braces.
    """
    return (
        template.replace("{id}", f"{key_prefix}{index}")
        .replace("{index}", str(index))
        .replace("{group}", str(index % groups))
    )


def duplicate_count(unique: int, ratio: float) -> int:
    """How many re-sends to add to `unique` bodies so they are `ratio` of everything sent."""
    if not 0 <= ratio < 1:
        raise ValueError("--duplicates must be a ratio in [0, 1)")
    return round(unique * ratio / (1 - ratio))


def with_duplicates(unique: Sequence[str], extra: int, rng: random.Random) -> list[str]:
    """Interleave `extra` re-sends of earlier bodies at random positions (never first)."""
    if extra and not unique:
        raise ValueError("duplicates need at least one body to repeat")
    total = len(unique) + extra
    duplicate_slots = set(rng.sample(range(1, total), extra)) if extra else set()
    originals = iter(unique)
    out: list[str] = []
    for slot in range(total):
        out.append(rng.choice(out) if slot in duplicate_slots else next(originals))
    return out


def generate_bodies(
    template: str,
    count: int,
    *,
    key_prefix: str,
    groups: int = 1,
    duplicates: float = 0.0,
    rng: random.Random,
) -> list[str]:
    """`count` bodies in total, of which `round(count * duplicates)` repeat an earlier one."""
    if count < 1:
        raise ValueError("--count must be at least 1")
    if groups < 1:
        raise ValueError("--groups must be at least 1")
    if not 0 <= duplicates < 1:
        raise ValueError("--duplicates must be a ratio in [0, 1)")
    extra = min(round(count * duplicates), count - 1)
    unique = [
        fill_template(template, index=index, key_prefix=key_prefix, groups=groups)
        for index in range(count - extra)
    ]
    return with_duplicates(unique, extra, rng)


def group_from_body(body: str, field: str) -> str:
    """The FIFO message group taken from a top-level field of a JSON body."""
    try:
        document = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--group-field {field}: body is not JSON: {body[:60]!r}") from exc
    if not isinstance(document, dict) or document.get(field) in (None, ""):
        raise ValueError(f"--group-field {field}: body has no {field!r}: {body[:60]!r}")
    return str(document[field])


def generated_dedup_id(run_id: str, index: int, body: str) -> str:
    """A per-message dedup id for FIFO queues without content-based deduplication.

    Salting with the run id keeps a second run (or an intended duplicate) from being silently
    dropped by SQS's 5-minute deduplication window.
    """
    return hashlib.sha256(f"{run_id}:{index}:{body}".encode()).hexdigest()


def build_messages(
    bodies: Sequence[str],
    *,
    attributes: Mapping[str, MessageAttributeValueTypeDef],
    fifo: bool,
    content_based_dedup: bool,
    run_id: str,
    group_id: str | None = None,
    group_field: str | None = None,
    dedup_id: str | None = None,
) -> list[OutgoingMessage]:
    """Attach attributes, group and dedup ids to bodies according to the queue type.

    `dedup_id` may contain `{index}`; without it a FIFO queue lacking content-based
    deduplication gets a generated id per message.
    """
    if group_id and group_field:
        raise ValueError("give --group-id or --group-field, not both")
    if fifo and not (group_id or group_field):
        raise ValueError("a FIFO queue needs --group-id or --group-field")
    messages: list[OutgoingMessage] = []
    for index, body in enumerate(bodies):
        group = group_from_body(body, group_field) if group_field else group_id
        dedup: str | None = None
        if dedup_id is not None:
            dedup = dedup_id.replace("{index}", str(index))
        elif fifo and not content_based_dedup:
            dedup = generated_dedup_id(run_id, index, body)
        messages.append(
            OutgoingMessage(body=body, attributes=attributes, group_id=group, dedup_id=dedup)
        )
    return messages
