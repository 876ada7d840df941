"""`invoke`: the handler's clients follow the CLI's region and DynamoDB endpoint, and the exit
code says whether SQS would redeliver anything.

Tables live in DynamoDB Local (the session fixture); queues and the stack in in-process moto.
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from typer.testing import Result

from exactly_once import IdempotencyStore, clients
from exactly_once_ops.sample_events import sqs_event
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.ports import free_port
from tests.cli.support import REGION, Invoke, QueuePair, drain

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

ROOT = Path(__file__).resolve().parents[2]
ORDERS = str(ROOT / "functions" / "orders")
PAYMENTS_API = str(ROOT / "functions" / "payments_api")
EVENTS = ROOT / "events"
pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")


@pytest.fixture
def handler_env(
    sqs: SQSClient,
    orders: QueuePair,
    fresh_idempotency_table: str,
    ledger_table: str,
    scope: str,
) -> list[str]:
    """--env options that give the orders handler its tables, scope and DLQ."""
    pairs = {
        "IDEMPOTENCY_TABLE": fresh_idempotency_table,
        "LEDGER_TABLE": ledger_table,
        "CONSUMER_SCOPE": scope,
        "DEAD_LETTER_QUEUE_URL": orders.dlq,
    }
    return [arg for name, value in pairs.items() for arg in ("--env", f"{name}={value}")]


def write_event(tmp_path: Path, bodies: list[str], name: str = "event.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(sqs_event(bodies)), encoding="utf-8")
    return str(path)


def response_of(output: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(output[output.rindex('{\n  "batchItemFailures"') :])
    return document


InvokeOrders = Callable[..., Result]


@pytest.fixture
def invoke_orders(cli: Invoke, handler_env: list[str], at_dynamodb_local: None) -> InvokeOrders:
    """`eonce [global options] invoke orders --event FILE` with the test's tables."""

    def run(event: str, *global_options: str) -> Result:
        return cli(
            *global_options,
            "invoke",
            "orders",
            "--source",
            ORDERS,
            "--no-from-stack",
            "--event",
            event,
            *handler_env,
        )

    return run


@pytest.mark.parametrize(
    "region_env",
    [{}, {"AWS_REGION": REGION}, {"AWS_DEFAULT_REGION": REGION}],
    ids=["no-region-variable", "only-AWS_REGION", "only-AWS_DEFAULT_REGION"],
)
def test_the_handler_gets_a_region_whatever_the_environment_sets(
    invoke_orders: InvokeOrders,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    region_env: dict[str, str],
) -> None:
    """Without a fix, no AWS_DEFAULT_REGION failed every record with NoRegionError, exit 0."""
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    for name, value in region_env.items():
        monkeypatch.setenv(name, value)
    result = invoke_orders(write_event(tmp_path, ['{"orderId": "r-1", "amount": 3}']))
    assert result.exit_code == 0, result.output
    assert "NoRegionError" not in result.output
    assert "processed" in result.output
    assert response_of(result.stdout) == {"batchItemFailures": []}


def test_the_global_region_reaches_the_handlers_clients(
    invoke_orders: InvokeOrders, tmp_path: Path
) -> None:
    result = invoke_orders(
        write_event(tmp_path, ['{"orderId": "r-2", "amount": 3}']), "--region", "eu-west-1"
    )
    assert result.exit_code == 0, result.output
    assert clients.dynamodb().meta.region_name == "eu-west-1"
    assert "region eu-west-1;" in result.output


def test_the_sample_events_run_in_order_do_not_collide(
    invoke_orders: InvokeOrders, sqs: SQSClient, orders: QueuePair
) -> None:
    """The sample events docs/cli.md and docs/operations.md show, in a row: no key reused
    with another payload, so no DLQ traffic except the poison message, which the layer
    dead-letters by design (exit 0).
    """
    outcomes: list[str] = []
    for name in (
        "orders-single.json",
        "orders-batch-duplicates.json",
        "orders-message-attributes.json",
        "orders-single.json",
        "orders-poison.json",
    ):
        result = invoke_orders(str(EVENTS / name))
        assert result.exit_code == 0, result.output
        assert "FingerprintMismatch" not in result.output
        outcomes.append(result.output)
    assert "duplicate" in outcomes[1]  # the batch's own repeats
    assert "duplicate" in outcomes[3]  # the single order, again
    (poison,) = drain(sqs, orders.dlq)
    assert poison["MessageAttributes"]["eo-error-type"]["StringValue"] == "NonJsonBody"


def test_a_reused_key_exits_zero_as_dead_lettered_by_design(
    invoke_orders: InvokeOrders, tmp_path: Path, sqs: SQSClient, orders: QueuePair
) -> None:
    assert invoke_orders(write_event(tmp_path, ['{"orderId": "m-1", "amount": 1}'])).exit_code == 0
    result = invoke_orders(write_event(tmp_path, ['{"orderId": "m-1", "amount": 2}']))
    assert result.exit_code == 0, result.output
    assert "FingerprintMismatch" in result.output
    (moved,) = drain(sqs, orders.dlq)
    assert moved["MessageAttributes"]["eo-error-type"]["StringValue"] == "FingerprintMismatch"


def test_a_record_reported_failed_exits_one(invoke_orders: InvokeOrders, tmp_path: Path) -> None:
    event = write_event(tmp_path, ['{"orderId": "f-1", "amount": 1, "failTimes": 1}'])
    result = invoke_orders(event)
    assert result.exit_code == 1
    assert len(response_of(result.stdout)["batchItemFailures"]) == 1
    assert result.stderr.rstrip().splitlines()[-1] == (
        "error: 1 record(s) reported failed: SQS would redeliver them"
    )


def test_an_unreachable_table_errors_every_record_and_exits_one(
    invoke_orders: InvokeOrders, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dead)
    monkeypatch.setenv("EO_CONNECT_TIMEOUT", "0.5")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    result = invoke_orders(write_event(tmp_path, ['{"orderId": "u-1", "amount": 1}']))
    assert result.exit_code == 1
    assert f"DynamoDB at {dead} (from AWS_ENDPOINT_URL_DYNAMODB)" in result.output
    assert "error" in result.output
    assert "EndpointConnectionError" in result.output


def test_a_raising_handler_exits_one(cli: Invoke, tmp_path: Path, handler_env: list[str]) -> None:
    (tmp_path / "handler.py").write_text(
        "def handle(event, context):\n    raise RuntimeError('boom')\n", encoding="utf-8"
    )
    event = write_event(tmp_path, ["{}"])
    result = cli(
        "invoke", "orders", "--source", str(tmp_path), "--no-from-stack", "-e", event, *handler_env
    )
    assert result.exit_code == 1
    assert result.stderr.rstrip().splitlines()[-1] == (
        "error: the handler raised RuntimeError: boom (every record would be retried)"
    )


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ([], "not an SQS event (no Records list"),
        ({"Records": []}, "not an SQS event (no Records list"),
        ({"detail-type": "Scheduled Event"}, "not an SQS event (no Records list"),
        ({"Records": [{"body": "x"}]}, "Records[0] is not an SQS record (no messageId)"),
        (
            {"Records": [{"messageId": "m", "eventSource": "aws:kinesis"}]},
            "Records[0] comes from aws:kinesis, not aws:sqs",
        ),
    ],
)
def test_input_that_is_not_an_sqs_event_is_refused(
    cli: Invoke, tmp_path: Path, event: Any, message: str
) -> None:
    path = tmp_path / "not-sqs.json"
    path.write_text(json.dumps(event), encoding="utf-8")
    result = cli("invoke", "orders", "--source", ORDERS, "--no-from-stack", "-e", str(path))
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: {path}: {message}")


def test_no_event_and_a_terminal_on_stdin_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """A real terminal: the console script must not sit waiting for input."""
    main, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "exactly_once_cli", "invoke", "orders", "--source", ORDERS],
            stdin=terminal,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            env={**os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}"},
        )
    finally:
        os.close(main)
        os.close(terminal)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: give --event FILE or pipe an event on stdin"


def orders_function_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.write(Path(ORDERS) / "handler.py", "handler.py")
    return buffer.getvalue()


def test_the_handler_uses_the_stacks_dynamodb_endpoint(
    cli: Invoke,
    cloudformation: CloudFormationClient,
    orders: QueuePair,
    ddb: DynamoDBClient,
    dynamodb_local: DynamoDBLocal,
    fresh_idempotency_table: str,
    ledger_table: str,
    scope: str,
    tmp_path: Path,
) -> None:
    """The local stack's tables live in DynamoDB Local, named by its LocalDynamoDbEndpoint
    output; moto (the default endpoint here) has no such table, so a wrong read would error.
    """
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName="fn", AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    variables = {
        "IDEMPOTENCY_TABLE": fresh_idempotency_table,
        "LEDGER_TABLE": ledger_table,
        "CONSUMER_SCOPE": scope,
        "DEAD_LETTER_QUEUE_URL": orders.dlq,
    }
    boto3.client("lambda", region_name=REGION).create_function(
        FunctionName="orders-fn",
        Runtime="python3.12",
        Role=role,
        Handler="handler.handle",
        Code={"ZipFile": orders_function_zip()},
        Environment={"Variables": variables},
    )
    template = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "OrdersFunctionName": {"Value": "orders-fn"},
            "IdempotencyTableName": {"Value": fresh_idempotency_table},
            "LocalDynamoDbEndpoint": {"Value": dynamodb_local.endpoint},
        },
    }
    cloudformation.create_stack(StackName="Local", TemplateBody=json.dumps(template))
    event = write_event(tmp_path, ['{"orderId": "s-1", "amount": 4}'])

    result = cli("invoke", "orders", "--source", ORDERS, "--stack", "Local", "-e", event)
    assert result.exit_code == 0, result.output
    assert f"DynamoDB at {dynamodb_local.endpoint} (from the stack output" in result.output
    record = IdempotencyStore(fresh_idempotency_table, client=ddb).get(scope, "s-1")
    assert record is not None
    assert record.status == "COMPLETED"


def test_an_api_gateway_sample_runs_the_payment_once_in_every_event_shape(
    cli: Invoke,
    fresh_idempotency_table: str,
    ledger_table: str,
    scope: str,
    at_dynamodb_local: None,
    ddb: DynamoDBClient,
) -> None:
    """Each committed shape carries its own key: its first invoke runs its payment, the second
    replays it; the sample without a key gets the 400 and exits 0 (an answer, not a server
    error)."""
    env = [
        *("--env", f"IDEMPOTENCY_TABLE={fresh_idempotency_table}"),
        *("--env", f"LEDGER_TABLE={ledger_table}"),
        *("--env", f"API_SCOPE={scope}"),
    ]
    outcomes = []
    for name in ("http-api", "rest-api", "function-url", "http-api", "no-key"):
        event = str(EVENTS / f"api-payment-{name}.json")
        result = cli(
            "invoke", "PaymentsApi", "--source", PAYMENTS_API, "--no-from-stack", "-e", event, *env
        )
        assert result.exit_code == 0, result.output
        # the handler's JSON logs and EMF metrics share stdout, as they would in Lambda
        (line,) = [x for x in result.stdout.splitlines() if x.startswith("PaymentsApi:")]
        outcomes.append(line)
    caller = "iam:arn:aws:iam::123456789012:user/payments-client"
    for line, (outcome, key) in zip(
        outcomes[:4],
        [
            ("processed", "pay-2026-0001"),
            ("processed", "pay-2026-0002"),
            ("processed", "pay-2026-0003"),
            ("replayed", "pay-2026-0001"),
        ],
        strict=True,
    ):
        assert line.startswith(f"PaymentsApi: {outcome} -> HTTP 201 (key {caller}|{key},")
    assert outcomes[4].startswith("PaymentsApi: bad_request -> HTTP 400")
    assert ddb.scan(TableName=ledger_table)["Count"] == 3
