"""End to end on the local stack: deploy the CDK app, poll, send, drain, check the ledger.

One stack per module (the deploy costs ~15 s); the CLI commands run against it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from exactly_once import ErrorInfo, IdempotencyStore
from exactly_once_cli.app import app
from local_aws.api_server import ApiServer
from local_aws.api_workload import ApiWorkload, run_api_workload, summary
from local_aws.demo import Workload
from local_aws.demo_report import build_report
from local_aws.demo_workload import send_workload
from local_aws.local_stack import LocalStack
from local_aws.poller import Poller, wait_until_drained

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(context={"stackName": "E2e"}) as running:
        yield running


def test_200_messages_with_duplicates_and_poison_take_effect_exactly_once(
    stack: LocalStack, tmp_path: Path
) -> None:
    workload = Workload(
        orders=200, payments=20, duplicate_ratio=0.3, poison=1, transient_ratio=0.0, work_ms=5
    )
    sqs = stack.sqs()
    with Poller(stack.bindings(), stack.aws_environment, workers=2, log_dir=tmp_path) as poller:
        sent = send_workload(sqs, stack.outputs, workload)
        urls = [stack.outputs[f"{name}QueueUrl"] for name in sent.sent]
        drained = wait_until_drained(sqs, urls, timeout_s=180)
        poller.stop()
        report = build_report(
            sqs,
            stack.ddb(),
            stack.outputs,
            sent,
            totals=poller.totals(),
            drained=drained,
            elapsed_s=0,
        )

    assert report.drained
    assert report.sent == {"Orders": 200, "Payments": 20}
    assert report.ledger.expected == 200 - 60 - 1 + 20 - 6 - 1
    assert report.ledger.double_effects == {}
    assert report.ledger.missing == set()
    assert report.ledger.executed_once == report.ledger.expected
    assert report.dead_letters == {"Orders": {"NonJsonBody": 1}, "Payments": {"PermanentError": 1}}
    assert report.totals is not None
    assert report.totals["processed"] == report.ledger.expected
    assert report.totals.get("handler_crashes", 0) == 0
    assert stack.outputs["LocalDynamoDbEndpoint"] == stack.dynamodb.endpoint


def cli(stack: LocalStack, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    for key, value in stack.aws_environment.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("COLUMNS", "200")  # rich would fold long ids in an 80-column terminal
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_invoke_runs_the_deployed_function_locally_with_a_sample_event(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    event = str(ROOT / "events" / "orders-batch-duplicates.json")
    output = cli(stack, monkeypatch, "invoke", "orders", "--event", event, "--stack", "E2e")
    response = json.loads(output[output.rindex('{\n  "batchItemFailures"') :])
    assert response == {"batchItemFailures": []}
    assert "processed" in output
    assert "duplicate" in output or "in_progress" in output


def test_locks_lists_and_resets_failed_records(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = IdempotencyStore(stack.outputs["IdempotencyTableName"], client=stack.ddb())
    got = store.acquire("orders", "stuck-1", lease_ms=-1, owner="crashed:req")
    assert got.acquired
    output = cli(stack, monkeypatch, "locks", "list", "--stuck-only", "--stack", "E2e")
    assert "orders#stuck-1" in output
    assert "crashed:req" in output
    shown = cli(stack, monkeypatch, "locks", "show", "orders", "stuck-1", "--stack", "E2e")
    assert '"status": "IN_PROGRESS"' in shown

    lock = store.acquire("orders", "failed-1", lease_ms=60_000, owner="x:y").lock
    assert lock is not None
    store.fail(lock, ErrorInfo("PermanentError", "bad data", retryable=False))
    assert "failed-1" in cli(
        stack, monkeypatch, "locks", "list", "--status", "failed", "--stack", "E2e"
    )
    cli(stack, monkeypatch, "locks", "reset", "orders", "failed-1", "--stack", "E2e")
    assert store.acquire("orders", "failed-1", lease_ms=1_000, owner="x:z").acquired


def test_the_deployed_api_serves_idempotent_requests_through_the_local_gateway(
    stack: LocalStack, tmp_path: Path
) -> None:
    """`make run`'s API part: concurrent clients per key, reused keys, a missing key; each
    key's payment is in the ledger once and every client of a key got the same body."""
    (binding,) = stack.api_bindings()
    assert binding.routes == (("POST", "/payments"),)
    assert binding.environment["API_SCOPE"] == "payments-api"
    with ApiServer(binding, stack.aws_environment, tmp_path / "api.log") as server:
        report = run_api_workload(
            server.endpoint,
            stack.ddb(),
            stack.outputs["LedgerTableName"],
            ApiWorkload(payments=12, clients_per_key=4, reused=2, transient_ratio=0.25, seed=3),
        )
    assert summary(report) | {"elapsed_s": 0} == summary(report) | {
        "elapsed_s": 0,
        "inconsistent_keys": [],
        "reused_refused": 2,
        "missing_key_refused": True,
        "ok": True,
    }
    assert report.ledger is not None
    assert report.ledger.executed_once == report.ledger.expected == 12
    assert report.statuses[201] == 12 * 4  # every client ends with the payment's response
    assert report.replays == 12 * 4 - 12  # ... of which one per key ran it
