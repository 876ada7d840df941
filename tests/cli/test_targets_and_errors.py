"""Queue resolution through stack outputs, global options, and one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from exactly_once_ops.targets import AwsTarget, TargetError, consumer_output, consumers_in
from local_aws.ports import free_port
from tests.cli.support import REGION, Invoke, counts, drain

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_sqs import SQSClient

TEMPLATE = {
    "Resources": {
        "OrdersDlq": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "stack-orders-dlq"}},
        "OrdersQueue": {
            "Type": "AWS::SQS::Queue",
            "Properties": {
                "QueueName": "stack-orders",
                "RedrivePolicy": {
                    "deadLetterTargetArn": {"Fn::GetAtt": ["OrdersDlq", "Arn"]},
                    "maxReceiveCount": 3,
                },
            },
        },
    },
    "Outputs": {
        "OrdersQueueUrl": {"Value": {"Ref": "OrdersQueue"}},
        "OrdersDeadLetterQueueUrl": {"Value": {"Ref": "OrdersDlq"}},
    },
}


@pytest.fixture
def stack(cloudformation: CloudFormationClient) -> dict[str, str]:
    """A tiny stack with the same output names as the CDK app; returns its outputs."""
    cloudformation.create_stack(StackName="ExactlyOnceSqs", TemplateBody=json.dumps(TEMPLATE))
    outputs = cloudformation.describe_stacks(StackName="ExactlyOnceSqs")["Stacks"][0]["Outputs"]
    return {o["OutputKey"]: o["OutputValue"] for o in outputs}


def one_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_send_and_replay_find_queues_in_the_stack(
    cli: Invoke, sqs: SQSClient, stack: dict[str, str]
) -> None:
    sent = cli("send", "--consumer", "orders", "--body", '{"orderId": "o-1"}')
    assert sent.exit_code == 0, sent.output
    assert [m["Body"] for m in drain(sqs, stack["OrdersQueueUrl"])] == ['{"orderId": "o-1"}']

    sqs.send_message(QueueUrl=stack["OrdersDeadLetterQueueUrl"], MessageBody='{"orderId": "o-2"}')
    replayed = cli("replay", "copy", "--consumer", "orders", "--wait-seconds", "0")
    assert replayed.exit_code == 0, replayed.output
    assert counts(sqs, stack["OrdersDeadLetterQueueUrl"]) == (0, 0)
    assert [m["Body"] for m in drain(sqs, stack["OrdersQueueUrl"])] == ['{"orderId": "o-2"}']


def test_missing_stack(cli: Invoke, sqs: SQSClient) -> None:
    result = cli("send", "--consumer", "orders", "--stack", "Nope", "--body", "{}")
    assert result.exit_code == 1
    assert one_line(result.output) == (
        f"error: stack 'Nope' does not exist in {REGION} at "
        f"https://cloudformation.{REGION}.amazonaws.com "
        "(check --stack / EONCE_STACK, --region, --endpoint-url, --profile)"
    )


def test_missing_output(cli: Invoke, stack: dict[str, str]) -> None:
    result = cli("send", "--consumer", "payments", "--body", "{}")
    assert result.exit_code == 2
    assert one_line(result.output) == (
        "error: no consumer 'payments' in stack 'ExactlyOnceSqs'; the consumers are: orders"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["send", "--body", "{}"], "name the queue: --queue-url URL, or --consumer"),
        (
            ["send", "--queue-url", "q", "--consumer", "shipping", "--count", "3"],
            "'shipping' needs --template",
        ),
        (["send", "--queue-url", "q", "--count", "5", "--duplicates", "1.5"], "--duplicates"),
        (["send", "--queue-url", "q"], "give exactly one of --body, --file, --jsonl"),
        (["send", "--queue-url", "q", "--file", "/nonexistent/b.json"], "No such file"),
        (["send", "--queue-url", "q", "--count", "zero"], "Invalid value for '--count'"),
        (["replay", "copy"], "name the queue: --dlq-url URL"),
        (["bogus"], "No such command 'bogus'"),
        (["--bogus", "send"], "No such option: --bogus"),
    ],
)
def test_bad_arguments_are_one_line(cli: Invoke, args: list[str], message: str) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    line = one_line(result.output)
    assert line.startswith("error: ")
    assert message in line


def test_replay_of_a_name_that_is_neither_a_command_nor_a_subscriber_is_one_line(
    cli: Invoke, stack: dict[str, str]
) -> None:
    """`eonce replay NAME` looks NAME up among the stack's subscribers (moto here)."""
    result = cli("replay", "bogus")
    assert result.exit_code == 2
    line = one_line(result.output)
    assert line.startswith("error: ")
    assert "No such command 'bogus'" in line


def test_unknown_profile_is_one_line(cli: Invoke) -> None:
    result = cli("--profile", "nope", "send", "--queue-url", "q", "--body", "{}")
    assert result.exit_code == 2
    assert "nope" in one_line(result.output)


@pytest.mark.parametrize("via_env", [False, True])
def test_unreachable_endpoint_fails_fast_in_one_line(
    cli: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    sqs_hooks: Callable[[Callable[[SQSClient], None]], None],
    via_env: bool,
) -> None:
    """Fast means few attempts, counted rather than timed: two tries, then one line."""
    attempts: list[str] = []

    def count_attempts(client: SQSClient) -> None:
        client.meta.events.register(
            "before-send.sqs.*", lambda request, **_: attempts.append(request.url)
        )

    sqs_hooks(count_attempts)
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    queue = f"{endpoint}/000000000000/orders-queue"
    args = ["send", "--queue-url", queue, "--body", "{}"]
    if via_env:
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    else:
        args = ["--endpoint-url", endpoint, *args]
    result = cli(*args)
    assert result.exit_code == 1
    assert len(attempts) == 2  # client_config: two attempts in all against an explicit endpoint
    line = one_line(result.output)
    assert f'Could not connect to the endpoint URL: "{endpoint}/"' in line
    assert "is the endpoint up?" in line


def test_no_arguments_prints_help(cli: Invoke) -> None:
    result = cli()
    assert "Usage:" in result.output
    assert "send" in result.output
    assert "replay" in result.output


def test_consumers_are_whatever_the_stack_outputs_declare() -> None:
    outputs = {
        "OrdersQueueUrl": "q-orders",
        "OrdersDeadLetterQueueUrl": "d-orders",
        "ShippingQueueUrl": "q-shipping",
        "IdempotencyTableName": "t",
    }
    assert consumers_in(outputs) == ["Orders", "Shipping"]
    assert consumer_output(outputs, "orders", "QueueUrl", "S") == "q-orders"
    assert consumer_output(outputs, "ORDERS", "DeadLetterQueueUrl", "S") == "d-orders"
    assert consumer_output(outputs, "Shipping", "QueueUrl", "S") == "q-shipping"
    with pytest.raises(
        TargetError, match=r"no consumer 'payments'.*the consumers are: orders, shipping"
    ):
        consumer_output(outputs, "payments", "QueueUrl", "S")


def test_consumers_command_lists_the_stack(cli: Invoke, stack: dict[str, str]) -> None:
    result = cli("consumers")
    assert result.exit_code == 0, result.output
    assert "orders" in result.output
    assert stack["OrdersDeadLetterQueueUrl"] in result.output


def test_stack_name_from_the_environment(
    cli: Invoke, stack: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EONCE_STACK", "Nope")
    result = cli("consumers")
    assert result.exit_code == 1
    assert "stack 'Nope' does not exist" in one_line(result.output)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "copy", "--dlq-url", "q", "--match-attribute", "novalue"], "--match-attribute"),
        (
            [
                "invoke",
                "orders",
                "-e",
                "events/orders-single.json",
                "--no-from-stack",
                "--env",
                "=x",
            ],
            "--env '=x'",
        ),
    ],
)
def test_name_value_options_reject_pairs_without_a_name(
    cli: Invoke, args: list[str], message: str
) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    line = one_line(result.output)
    assert message in line
    assert line.endswith("expected NAME=VALUE")


@pytest.mark.parametrize(
    ("options", "env", "expected"),
    [
        (["--region", "eu-west-2"], {"AWS_REGION": "eu-west-1"}, "eu-west-2"),
        ([], {"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-west-2"}, "eu-west-1"),
        ([], {"AWS_DEFAULT_REGION": "us-west-2"}, "us-west-2"),
        (["--profile", "mumbai"], {"AWS_DEFAULT_REGION": "us-west-2"}, "us-west-2"),
        (["--profile", "mumbai"], {}, "ap-south-1"),
        ([], {}, "us-east-1"),
    ],
)
def test_one_region_rule(
    cli: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    options: list[str],
    env: dict[str, str],
    expected: str,
) -> None:
    """--region, else AWS_REGION, else AWS_DEFAULT_REGION, else the profile's, else us-east-1:
    for the CLI's clients and for what it writes (an event's awsRegion).
    """
    config = tmp_path / "config"
    config.write_text("[profile mumbai]\nregion = ap-south-1\n", encoding="utf-8")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = cli(*options, "event", "--body", "{}")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["Records"][0]["awsRegion"] == expected

    profile = "mumbai" if "--profile" in options else None
    region = options[1] if "--region" in options else None
    target = AwsTarget(profile=profile, region=region)
    assert target.region_name == expected
    assert target.sqs().meta.region_name == expected


def test_an_unreachable_service_endpoint_names_its_variable(
    cli: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL_SQS", dead)
    result = cli("send", "--queue-url", f"{dead}/000000000000/q", "--body", "{}")
    assert result.exit_code == 1
    assert one_line(result.output) == (
        f'error: Could not connect to the endpoint URL: "{dead}/" '
        "(is the endpoint up? check AWS_ENDPOINT_URL_SQS)"
    )


def test_status_refuses_json_with_watch(cli: Invoke) -> None:
    result = cli("status", "--json", "--watch")
    assert result.exit_code == 2
    assert one_line(result.output) == (
        "error: --json prints one document; for a refreshing view drop --json"
    )
