"""`locks` against DynamoDB Local: what --stuck-only and --limit show, times in `locks show`,
and which DynamoDB endpoint is read (the stack's LocalDynamoDbEndpoint output, not moto's copy).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import boto3
import pytest

from exactly_once import ErrorInfo, IdempotencyStore
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.ports import free_port
from local_aws.tables import create_idempotency_table
from tests.cli.support import REGION, Invoke

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient


def stuck(store: IdempotencyStore, scope: str, key: str) -> None:
    assert store.acquire(scope, key, lease_ms=-1, owner="crashed:req").acquired


def live(store: IdempotencyStore, scope: str, key: str) -> None:
    assert store.acquire(scope, key, lease_ms=3_600_000, owner="busy:req").acquired


def failed(store: IdempotencyStore, scope: str, key: str) -> None:
    lock = store.acquire(scope, key, lease_ms=60_000, owner="x:y").lock
    assert lock is not None
    store.fail(lock, ErrorInfo("PermanentError", "bad data", retryable=False))


def one_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    return lines[0]


def test_stuck_only_lists_expired_in_progress_records_and_nothing_else(
    cli: Invoke, store: IdempotencyStore, scope: str, at_dynamodb_local: None
) -> None:
    stuck(store, scope, "stuck-1")
    live(store, scope, "live-1")
    failed(store, scope, "failed-1")

    result = cli("locks", "list", "--stuck-only", "--table", store.table_name)
    assert result.exit_code == 0, result.output
    assert f"{scope}#stuck-1" in result.output
    assert "live-1" not in result.output
    assert "failed-1" not in result.output
    assert "1 record(s) in" in result.output

    everything = cli("locks", "list", "--table", store.table_name)
    assert all(key in everything.output for key in ("stuck-1", "live-1", "failed-1"))


def test_stuck_only_with_status_failed_is_a_usage_error(cli: Invoke) -> None:
    result = cli("locks", "list", "--stuck-only", "--status", "failed", "--table", "t")
    assert result.exit_code == 2
    assert one_line(result.output) == (
        "error: --stuck-only lists IN_PROGRESS records only; drop --status failed"
    )


def test_limit_says_when_more_records_exist(
    cli: Invoke, store: IdempotencyStore, scope: str, at_dynamodb_local: None
) -> None:
    stuck(store, scope, "a")
    failed(store, scope, "b")
    failed(store, scope, "c")

    cut = cli("locks", "list", "--limit", "2", "--table", store.table_name)
    assert cut.exit_code == 0, cut.output
    assert "showing 2; more exist: raise --limit" in cut.output
    assert sum(f"{scope}#" in line for line in cut.output.splitlines()) == 2

    whole = cli("locks", "list", "--limit", "3", "--table", store.table_name)
    assert "more exist" not in whole.output
    assert "3 record(s) in" in whole.output


def test_show_adds_utc_times_and_ages(
    cli: Invoke, store: IdempotencyStore, scope: str, at_dynamodb_local: None
) -> None:
    live(store, scope, "k-1")
    result = cli("locks", "show", scope, "k-1", "--table", store.table_name)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    lease_ms = shown["lease_expires_at_ms"]
    iso = datetime.fromtimestamp(lease_ms / 1000, UTC).isoformat(timespec="milliseconds")
    assert shown["lease_expires_at"].startswith(iso.replace("+00:00", "Z") + " (in ")  # 1h lease
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(.+\)", shown["created_at"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z \(in .+\)", shown["expires_at"])


# -- which DynamoDB endpoint the CLI reads ---------------------------------------------------


def local_stack(cloudformation: CloudFormationClient, table: str, endpoint: str) -> None:
    """A stack like the local one: its table's name, and where DynamoDB really is."""
    template = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {
            "IdempotencyTableName": {"Value": table},
            "LocalDynamoDbEndpoint": {"Value": endpoint},
        },
    }
    cloudformation.create_stack(StackName="ExactlyOnceSqs", TemplateBody=json.dumps(template))


@pytest.fixture
def moto_copy(cloudformation: CloudFormationClient, fresh_idempotency_table: str) -> None:
    """moto's own, empty table of the same name: what the CLI used to read by mistake."""
    create_idempotency_table(boto3.client("dynamodb", region_name=REGION), fresh_idempotency_table)


def test_the_stack_output_names_the_dynamodb_to_read(
    cli: Invoke,
    cloudformation: CloudFormationClient,
    moto_copy: None,
    store: IdempotencyStore,
    scope: str,
    dynamodb_local: DynamoDBLocal,
) -> None:
    failed(store, scope, "f-1")
    local_stack(cloudformation, store.table_name, dynamodb_local.endpoint)

    result = cli("locks", "list")
    assert result.exit_code == 0, result.output
    assert f"{scope}#f-1" in result.output
    assert (
        f"1 record(s) in {store.table_name} at {dynamodb_local.endpoint} "
        "(from the stack output LocalDynamoDbEndpoint)"
    ) in result.output
    assert '"status": "FAILED"' in cli("locks", "show", scope, "f-1").output


def test_an_unreachable_stack_endpoint_names_the_output_and_the_variable(
    cli: Invoke, cloudformation: CloudFormationClient, moto_copy: None, store: IdempotencyStore
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    local_stack(cloudformation, store.table_name, dead)
    result = cli("locks", "list")
    assert result.exit_code == 1
    assert one_line(result.output) == (
        f'error: Could not connect to the endpoint URL: "{dead}/" (is the endpoint up? check '
        "the stack output LocalDynamoDbEndpoint, or set AWS_ENDPOINT_URL_DYNAMODB)"
    )


def test_aws_endpoint_url_dynamodb_beats_the_stack_output(
    cli: Invoke,
    cloudformation: CloudFormationClient,
    moto_copy: None,
    store: IdempotencyStore,
    scope: str,
    at_dynamodb_local: None,
) -> None:
    failed(store, scope, "f-2")
    local_stack(cloudformation, store.table_name, f"http://127.0.0.1:{free_port()}")
    result = cli("locks", "list")
    assert result.exit_code == 0, result.output
    assert f"{scope}#f-2" in result.output
    assert "(from AWS_ENDPOINT_URL_DYNAMODB)" in result.output


def test_an_unreachable_aws_endpoint_url_dynamodb_is_named(
    cli: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", dead)
    result = cli("locks", "show", "orders", "o-1", "--table", "t")
    assert result.exit_code == 1
    assert one_line(result.output).endswith("(is the endpoint up? check AWS_ENDPOINT_URL_DYNAMODB)")


def test_without_output_or_variable_the_global_endpoint_is_used(
    cli: Invoke, store: IdempotencyStore, scope: str, dynamodb_local: DynamoDBLocal
) -> None:
    """Emulators other than the local stack keep DynamoDB behind their one endpoint."""
    failed(store, scope, "f-3")
    endpoint = dynamodb_local.endpoint
    args = ["locks", "list", "--status", "failed", "--table", store.table_name]
    result = cli("--endpoint-url", endpoint, *args)
    assert result.exit_code == 0, result.output
    assert f"{scope}#f-3" in result.output
    assert f"at {endpoint} (from --endpoint-url / AWS_ENDPOINT_URL)" in result.output

    dead = f"http://127.0.0.1:{free_port()}"
    unreachable = cli("--endpoint-url", dead, *args)
    assert unreachable.exit_code == 1
    assert one_line(unreachable.output).endswith(
        "(is the endpoint up? check --endpoint-url / AWS_ENDPOINT_URL, "
        "or set AWS_ENDPOINT_URL_DYNAMODB)"
    )
