"""What the CLI shows of a message or a record (a body, an error message, a key) is printed as
text, never read as rich markup (issue 26, defects 5, 8 and 11): `replay copy --dry-run`'s new
eo-error-message column, `locks list`'s table and `invoke`'s results passed those strings to
rich as markup, so pydantic's "[type=int_parsing, ...]" vanished from the line an operator reads
before replaying, and a key or message holding "[/]" ended the command with rich's MarkupError
traceback."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from exactly_once import ErrorInfo, IdempotencyStore
from tests.cli.support import Invoke, QueuePair
from tests.cli.test_invoke import write_event
from tests.cli.test_replay_copy import FAST, dead_letter, layer_marks, order

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

PYDANTIC = "Input should be a valid integer [type=int_parsing, input_value='x', input_type=str]"
CLOSING = "unexpected [/] in the amount"
BODY = '{"note": "[bold]kept as sent[/bold]"}'


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide enough that no cell folds: each string is looked for whole."""
    monkeypatch.setenv("COLUMNS", "600")


def string(value: str) -> MessageAttributeValueTypeDef:
    return {"DataType": "String", "StringValue": value}


def test_the_dry_run_prints_error_messages_and_bodies_as_they_are(
    cli: Invoke, sqs: SQSClient, orders: QueuePair
) -> None:
    dead_letter(
        sqs,
        orders.dlq,
        BODY,
        {**layer_marks("ValidationError"), "eo-error-message": string(PYDANTIC)},
    )
    dead_letter(
        sqs,
        orders.dlq,
        order("o-2"),
        {**layer_marks("ValueError"), "eo-error-message": string(CLOSING)},
    )

    result = cli("replay", "copy", "--dlq-url", orders.dlq, "--dry-run", *FAST)

    assert result.exit_code == 0, result.output
    for text in (PYDANTIC, CLOSING, BODY):
        assert text in result.stdout, result.stdout


def test_locks_list_prints_keys_and_errors_as_they_are(
    cli: Invoke, store: IdempotencyStore, scope: str, at_dynamodb_local: None
) -> None:
    key = "cart[/]-[bold]7"
    lock = store.acquire(scope, key, lease_ms=60_000, owner="worker[1]:[red]req").lock
    assert lock is not None
    store.fail(lock, ErrorInfo("ValidationError", PYDANTIC, retryable=False))

    result = cli("locks", "list", "--table", store.table_name)

    assert result.exit_code == 0, result.output
    assert f"{scope}#{key}" in result.stdout, result.stdout
    assert f"ValidationError: {PYDANTIC} (permanent)" in result.stdout, result.stdout


RESULTS_HANDLER = f"""
from types import SimpleNamespace


class Handler:
    \"\"\"Reports each record dead-lettered, as the layer's consumer does in `last_results`.\"\"\"

    last_results = []

    def __call__(self, event, context):
        Handler.last_results = [
            SimpleNamespace(
                message_id=record["messageId"],
                key="cart[/]-[bold]7",
                outcome=SimpleNamespace(value="dead_lettered"),
                report_failure=False,
                fence=1,
                reason={f"ValidationError: {PYDANTIC}"!r},
            )
            for record in event["Records"]
        ]
        return {{"batchItemFailures": []}}


handle = Handler()
"""


def test_invoke_prints_keys_and_reasons_as_they_are(
    cli: Invoke, tmp_path: Path, restored_environment: None
) -> None:
    (tmp_path / "handler.py").write_text(RESULTS_HANDLER, encoding="utf-8")
    event = write_event(tmp_path, ["{}"])

    result = cli(
        "invoke",
        "orders",
        "--source",
        str(tmp_path),
        "--no-from-stack",
        "-e",
        event,
        "--env",
        "IDEMPOTENCY_TABLE=unused",
    )

    assert result.exit_code == 0, result.output
    assert "cart[/]-[bold]7" in result.stdout, result.stdout
    assert f"ValidationError: {PYDANTIC}" in result.stdout, result.stdout
