"""`replay copy --dry-run` shows why each message was dead-lettered (issue 26, defect 11): the
preview named the layer's eo-error-type but hid its eo-error-message, the one thing an
operator reads before deciding to replay."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from tests.cli.support import Invoke, QueuePair, counts
from tests.cli.test_replay_copy import FAST, dead_letter, layer_marks, order

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef


def string(value: str) -> MessageAttributeValueTypeDef:
    return {"DataType": "String", "StringValue": value}


def test_the_dry_run_shows_each_messages_error_message(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    marks = layer_marks("PermanentError")
    marks["eo-error-message"] = string("amount must be a non-negative number, got -3")
    plain = dead_letter(sqs, orders.dlq, order("o-1"), marks)
    # the layer packs its eo-* attributes into eo-failure when the message has too many
    packed_marks = {
        "eo-failure": string(
            json.dumps({"eo-error-type": "ValueError", "eo-error-message": "no such account"})
        )
    }
    packed = dead_letter(sqs, orders.dlq, order("o-2"), packed_marks)
    bare = dead_letter(sqs, orders.dlq, order("o-3"))  # SQS's own redrive: no error recorded

    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--dry-run", *FAST)

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "messageId" in line)
    columns = [cell.strip() for cell in header.strip("┃ ").split("┃")]
    rows = {
        cells[0]: dict(zip(columns, cells, strict=True))
        for line in lines
        if line.startswith("│")
        for cells in [[cell.strip() for cell in line.strip("│ ").split("│")]]
        if cells[0] in (plain, packed, bare)  # the preview's rows, not the summary's
    }
    assert rows[plain]["eo-error-type"] == "PermanentError"
    assert rows[plain]["eo-error-message"] == "amount must be a non-negative number, got -3"
    assert rows[packed]["eo-error-type"] == "ValueError"
    assert rows[packed]["eo-error-message"] == "no such account"
    assert rows[bare]["eo-error-message"] == ""
    assert counts(sqs, orders.dlq) == (3, 0)
