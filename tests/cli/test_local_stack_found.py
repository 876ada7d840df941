"""After `eonce up`, commands find the local stack by themselves (issue 26, defect 4): `send`,
`locks` and `replay` used to fail with "no AWS credentials" until `eval "$(eonce env)"`.

The stack `up` serves is stood in for by its state folder: `up.json` naming a moto server (a
CloudFormation stack with a consumer's queues, its table in DynamoDB Local) and the lock this
process holds, as the serving process does. The shell names no target: no credentials, no
endpoint, no profile.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest

from exactly_once_ops.local_state import StateLock, StatePaths, UpState, utc_now
from exactly_once_ops.local_target import explicit_setting
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.ports import free_port
from tests.cli.support import REGION, Invoke, counts

KEY = "testing"  # moto takes any credentials


@dataclass(frozen=True)
class Served:
    stack: str
    endpoint: str
    queue_url: str

    @property
    def note(self) -> str:
        return f"using the local stack {self.stack} (pid {os.getpid()}) at {self.endpoint}"


def deploy(moto_endpoint: str, stack: str, table: str, dynamodb_endpoint: str) -> str:
    """A stack with an `Orders` consumer's queues and the idempotency table; the queue's URL."""
    template = {
        "Resources": {
            "OrdersQueue": {"Type": "AWS::SQS::Queue"},
            "OrdersDlq": {"Type": "AWS::SQS::Queue"},
        },
        "Outputs": {
            "OrdersQueueUrl": {"Value": {"Ref": "OrdersQueue"}},
            "OrdersDeadLetterQueueUrl": {"Value": {"Ref": "OrdersDlq"}},
            "IdempotencyTableName": {"Value": table},
            "LocalDynamoDbEndpoint": {"Value": dynamodb_endpoint},
        },
    }
    cloudformation = boto3.client(
        "cloudformation",
        endpoint_url=moto_endpoint,
        region_name=REGION,
        aws_access_key_id=KEY,
        aws_secret_access_key=KEY,
    )
    cloudformation.create_stack(StackName=stack, TemplateBody=json.dumps(template))
    outputs = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["Outputs"]
    return next(o["OutputValue"] for o in outputs if o["OutputKey"] == "OrdersQueueUrl")


@pytest.fixture
def nothing_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell that names no target (the CLI tests' default is the test credentials)."""
    for name in list(os.environ):
        if name.startswith(("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY", "AWS_SECRET", "AWS_SESSION")):
            monkeypatch.delenv(name)
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def served(
    nothing_named: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    moto_endpoint: str,
    dynamodb_local: DynamoDBLocal,
    fresh_idempotency_table: str,
) -> Iterator[Served]:
    """A local stack `up` serves from this test's state folder (a stack name of its own, so
    --stack must default to it)."""
    stack = f"MyApp{uuid.uuid4().hex[:8]}"
    queue_url = deploy(moto_endpoint, stack, fresh_idempotency_table, dynamodb_local.endpoint)
    paths = StatePaths(tmp_path / "state")
    monkeypatch.setenv("EONCE_STATE_DIR", str(paths.root))
    with StateLock(paths):
        paths.write_state(
            UpState(
                pid=os.getpid(),
                stack=stack,
                region=REGION,
                endpoint_url=moto_endpoint,
                dynamodb_endpoint_url=dynamodb_local.endpoint,
                environment={
                    "AWS_ENDPOINT_URL": moto_endpoint,
                    "AWS_ACCESS_KEY_ID": "testing",
                    "AWS_SECRET_ACCESS_KEY": "testing",
                    "EONCE_STACK": stack,
                },
                outputs={},
                logs={},
                workers=1,
                started_at=utc_now(),
            )
        )
        yield Served(stack, moto_endpoint, queue_url)


def test_send_finds_the_local_stack_and_says_so_once(cli: Invoke, served: Served) -> None:
    result = cli("send", "--consumer", "orders", "--count", "3")
    assert result.exit_code == 0, result.output
    assert result.output.count(served.note) == 1
    sqs = boto3.client(
        "sqs",
        endpoint_url=served.endpoint,
        region_name=REGION,
        aws_access_key_id=KEY,
        aws_secret_access_key=KEY,
    )
    assert counts(sqs, served.queue_url) == (3, 0)


def test_locks_and_replay_find_it(
    cli: Invoke, served: Served, fresh_idempotency_table: str
) -> None:
    locks = cli("locks", "list")
    assert locks.exit_code == 0, locks.output
    assert served.note in locks.output
    assert f"0 record(s) in {fresh_idempotency_table}" in locks.output

    replay = cli("replay", "copy", "--consumer", "orders", "--dry-run", "--wait-seconds", "0")
    assert replay.exit_code == 0, replay.output
    assert served.note in replay.output


def test_a_region_variable_alone_names_no_target(
    cli: Invoke, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    result = cli("consumers")
    assert result.exit_code == 0, result.output
    assert served.note in result.output


def test_an_explicit_endpoint_wins(cli: Invoke, served: Served) -> None:
    """Another endpoint, and none of the local stack's credentials borrowed for it."""
    elsewhere = f"http://127.0.0.1:{free_port()}"
    result = cli("--endpoint-url", elsewhere, "consumers", "--stack", served.stack)
    assert result.exit_code == 1
    assert "using the local stack" not in result.output
    assert "no AWS credentials found" in result.output


def test_a_profile_variable_wins(
    cli: Invoke, served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    result = cli("consumers")
    assert result.exit_code == 2
    assert "using the local stack" not in result.output
    assert "no-such-profile" in result.output


def test_an_explicit_stack_wins(cli: Invoke, served: Served) -> None:
    result = cli("consumers", "--stack", "Other")
    assert result.exit_code == 1
    assert f"stack 'Other' does not exist in {REGION} at {served.endpoint}" in result.output


def test_without_a_stack_up_nothing_changes(
    cli: Invoke, nothing_named: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EONCE_STATE_DIR", str(tmp_path / "empty"))
    result = cli("send", "--consumer", "orders", "--count", "1")
    assert result.exit_code == 1
    assert "no AWS credentials found" in result.output


@pytest.mark.parametrize(
    ("options", "environ", "named"),
    [
        ((None, None, None), {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "x"}, None),
        ((None, None, None), {"AWS_CONFIG_FILE": "/dev/null"}, None),
        ((None, None, None), {"AWS_ACCESS_KEY_ID": "AKIA"}, "AWS_ACCESS_KEY_ID"),
        ((None, None, None), {"AWS_ENDPOINT_URL_SQS": "http://x"}, "AWS_ENDPOINT_URL_SQS"),
        ((None, None, None), {"AWS_ACCESS_KEY_ID": ""}, None),
        (("http://x", None, None), {}, "--endpoint-url"),
        ((None, "dev", None), {}, "--profile"),
        ((None, None, "eu-west-1"), {}, "--region"),
    ],
)
def test_the_rule(
    options: tuple[str | None, str | None, str | None],
    environ: dict[str, str],
    named: str | None,
) -> None:
    assert explicit_setting(*options, environ=environ) == named
