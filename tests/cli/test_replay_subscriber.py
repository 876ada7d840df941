"""`eonce replay SUBSCRIBER` against a stack deployed into the local emulator: the subscriber's
code runs in this process (moto cannot run functions), on the SNS event rebuilt from each
message of its DLQ, whatever the shape.

Queues, topic, function metadata and the stack live in in-process moto; the idempotency table in
DynamoDB Local. The subscriber is a small handler of the test's own: it records each run in a
file, fails permanently while a "broken" file exists (a cause that can be fixed), and raises
(Lambda would retry) for a sale marked `fail`.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from typer.testing import Result

from exactly_once.sns.messages import from_lambda_record
from exactly_once_ops.sns_events import lambda_sns_event, sns_envelope, timestamp
from exactly_once_ops.subscriber_replay import Subscription, rebuild
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.sns_delivery import (
    DEAD_LETTER_QUEUE,
    ON_FAILURE_DESTINATION,
    SubscriberBinding,
    dead_letter,
)
from tests.cli.support import REGION, Invoke, counts, drain

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

pytestmark = pytest.mark.usefixtures("restored_environment", "layer_logs_to_current_stdout")

FAST = ("--wait-seconds", "0")
FUNCTION = "ExactlyOnceSqs-SalesCounter-fn"
SUBSCRIPTION = "sales-subscription"

HANDLER = '''"""A subscriber that writes each run to RUNS_FILE; broken while BROKEN_FILE exists."""
import os
from pathlib import Path

from exactly_once import PermanentError, sns_subscriber


@sns_subscriber(key="orderId")
def handle(message, ctx):
    if Path(os.environ["BROKEN_FILE"]).exists():
        raise PermanentError("the price list is missing")
    if message.get("fail"):
        raise RuntimeError("the warehouse is down")
    with Path(os.environ["RUNS_FILE"]).open("a", encoding="utf-8") as runs:
        runs.write(message["orderId"] + "\\n")
    return {"orderId": ctx.key}
'''


@dataclass(frozen=True)
class Deployed:
    dlq: str
    topic_arn: str
    source: Path
    runs: Path
    broken: Path

    def ran(self) -> list[str]:
        return self.runs.read_text().split() if self.runs.exists() else []


def function_zip(source: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.write(source / "handler.py", "handler.py")
    return buffer.getvalue()


def deploy(
    sqs: SQSClient,
    cloudformation: CloudFormationClient,
    tmp_path: Path,
    environment: dict[str, str],
    outputs: dict[str, str] | None = None,
) -> Deployed:
    """The SalesCounter subscriber as the stack outputs name it: function, DLQ, topic."""
    source = tmp_path / "subscriber"
    source.mkdir()
    (source / "handler.py").write_text(HANDLER, encoding="utf-8")
    dlq = sqs.create_queue(QueueName="sales-counter-dlq")["QueueUrl"]
    topic_arn = boto3.client("sns", region_name=REGION).create_topic(Name="Sales")["TopicArn"]
    role = boto3.client("iam", region_name=REGION).create_role(
        RoleName="sales-counter", AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    boto3.client("lambda", region_name=REGION).create_function(
        FunctionName=FUNCTION,
        Runtime="python3.12",
        Role=role,
        Handler="handler.handle",
        Code={"ZipFile": function_zip(source)},
        Timeout=30,
        Environment={"Variables": {**environment, "DEAD_LETTER_QUEUE_URL": dlq}},
    )
    values = {
        "SalesTopicArn": topic_arn,
        "SalesCounterFunctionName": FUNCTION,
        "SalesCounterDeadLetterQueueUrl": dlq,
        "OrdersQueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/orders",
        **(outputs or {}),
    }
    template = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {key: {"Value": value} for key, value in values.items()},
    }
    cloudformation.create_stack(StackName="ExactlyOnceSqs", TemplateBody=json.dumps(template))
    return Deployed(
        dlq, topic_arn, source, Path(environment["RUNS_FILE"]), Path(environment["BROKEN_FILE"])
    )


@pytest.fixture
def subscriber(
    sqs: SQSClient,
    cloudformation: CloudFormationClient,
    tmp_path: Path,
    fresh_idempotency_table: str,
    scope: str,
    dynamodb_local: DynamoDBLocal,
    monkeypatch: pytest.MonkeyPatch,
) -> Deployed:
    """Deployed into "the local emulator": the stack has a LocalDynamoDbEndpoint output."""
    environment = {
        "IDEMPOTENCY_TABLE": fresh_idempotency_table,
        "SUBSCRIBER_SCOPE": scope,
        "RUNS_FILE": str(tmp_path / "runs.txt"),
        "BROKEN_FILE": str(tmp_path / "broken"),
    }
    for name in ("RUNS_FILE", "BROKEN_FILE"):  # the replay sets them here: undo it after
        monkeypatch.setenv(name, environment[name])
    local = {"LocalDynamoDbEndpoint": dynamodb_local.endpoint}
    return deploy(sqs, cloudformation, tmp_path, environment, local)


def sale(order_id: str, **extra: Any) -> str:
    return json.dumps({"orderId": order_id, "amount": 5, **extra})


def sns_event(topic_arn: str, message: str, message_id: str) -> dict[str, Any]:
    """What SNS invokes the subscriber with, for one published message."""
    envelope = sns_envelope(
        message,
        topic_arn=topic_arn,
        message_id=message_id,
        sent_at=timestamp(),
        attributes={"channel": {"Type": "String", "Value": "web"}},
    )
    return lambda_sns_event([envelope], f"{topic_arn}:{SUBSCRIPTION}")


def lambda_failure(
    sqs: SQSClient, deployed: Deployed, event: dict[str, Any], failure_format: str
) -> None:
    """What Lambda sends after its last retry, as the local stack writes it: the on-failure
    record, or (a function with a DeadLetterConfig) the event with error attributes."""
    binding = SubscriberBinding(
        subscriber="SalesCounter",
        function_name=FUNCTION,
        source_dir=str(deployed.source),
        handler="handler.handle",
        environment={},
        timeout_s=30,
        topic_arn=deployed.topic_arn,
        subscription_arn=f"{deployed.topic_arn}:{SUBSCRIPTION}",
        tap_queue_url="",
        dead_letter_queue_url=deployed.dlq,
        failure_format=failure_format,
        function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:{FUNCTION}",
    )
    error = RuntimeError("simulated transient failure on attempt 3")
    dead_letter(sqs, binding, event, "req-1", error, 3)


def sns_redrive(sqs: SQSClient, deployed: Deployed, message: str, message_id: str) -> None:
    """What SNS itself puts in a Lambda subscription's DLQ: the notification envelope."""
    envelope = sns_envelope(
        message, topic_arn=deployed.topic_arn, message_id=message_id, sent_at=timestamp()
    )
    sqs.send_message(QueueUrl=deployed.dlq, MessageBody=json.dumps(envelope))


def permanent_failure(
    cli: Invoke, deployed: Deployed, tmp_path: Path, order_id: str, message_id: str
) -> MessageTypeDef:
    """Run the subscriber while it is broken: the layer dead-letters the message itself, with
    the FAILED record's nonce. Returns that DLQ message (left in the DLQ)."""
    deployed.broken.touch()
    path = tmp_path / f"{message_id}.json"
    event = sns_event(deployed.topic_arn, sale(order_id), message_id)
    path.write_text(json.dumps(event), encoding="utf-8")
    result = cli("invoke", "SalesCounter", "--source", str(deployed.source), "--event", str(path))
    assert result.exit_code == 0, result.output
    assert "permanent" in result.output
    deployed.broken.unlink()  # the cause is fixed
    (message,) = drain_and_keep(deployed)
    return message


def drain_and_keep(deployed: Deployed) -> list[MessageTypeDef]:
    """Look at the DLQ without changing it: receive everything, then send it back as it was."""
    sqs = boto3.client("sqs", region_name=REGION)
    messages = drain(sqs, deployed.dlq)
    for message in messages:
        resend(sqs, deployed.dlq, message)
    return messages


def resend(
    sqs: SQSClient, dlq: str, message: MessageTypeDef, changed: dict[str, Any] | None = None
) -> None:
    """Send a received message again, as it was (with `changed` attributes replaced)."""
    attributes: dict[str, Any] = {
        name: {
            key: value
            for key, value in attribute.items()
            if key in ("DataType", "StringValue", "BinaryValue")
        }
        for name, attribute in {**message.get("MessageAttributes", {}), **(changed or {})}.items()
    }
    sqs.send_message(QueueUrl=dlq, MessageBody=message["Body"], MessageAttributes=attributes)


def replay(cli: Invoke, deployed: Deployed, *args: str) -> Result:
    """`eonce replay SalesCounter ...` with the test's subscriber code."""
    return cli("replay", "SalesCounter", "--source", str(deployed.source), *FAST, *args)


def nonce_of(message: MessageTypeDef) -> str:
    return message["MessageAttributes"]["eo-replay-nonce"]["StringValue"]


def each_shape(cli: Invoke, sqs: SQSClient, deployed: Deployed, tmp_path: Path) -> None:
    """One message of each shape in the DLQ: SNS MessageIds sns-1 to sns-4, orders o-1 to o-4
    (permanent, on-failure, lambda-dlq, sns-redrive); the permanent one's cause is fixed."""
    permanent_failure(cli, deployed, tmp_path, "o-1", "sns-1")
    event = sns_event(deployed.topic_arn, sale("o-2"), "sns-2")
    lambda_failure(sqs, deployed, event, ON_FAILURE_DESTINATION)
    event = sns_event(deployed.topic_arn, sale("o-3"), "sns-3")
    lambda_failure(sqs, deployed, event, DEAD_LETTER_QUEUE)
    sns_redrive(sqs, deployed, sale("o-4"), "sns-4")


def test_each_shape_is_rebuilt_and_replayed_once(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, tmp_path: Path
) -> None:
    each_shape(cli, sqs, subscriber, tmp_path)

    result = replay(cli, subscriber)

    assert result.exit_code == 0, result.output
    assert sorted(subscriber.ran()) == ["o-1", "o-2", "o-3", "o-4"]
    assert counts(sqs, subscriber.dlq) == (0, 0)
    assert "replayed 4 message(s)" in result.output
    for shape, sns_id in (
        ("permanent", "sns-1"),
        ("on-failure", "sns-2"),
        ("lambda-dlq", "sns-3"),
        ("sns-redrive", "sns-4"),
    ):
        (row,) = [line for line in result.output.splitlines() if f" {sns_id} " in line]
        assert f" {shape} " in row
        assert "Returned (processed)" in row
    again = replay(cli, subscriber)  # nothing left: nothing runs twice
    assert again.exit_code == 0, again.output
    assert sorted(subscriber.ran()) == ["o-1", "o-2", "o-3", "o-4"]


def test_dry_run_lists_each_shape_and_reason_and_changes_nothing(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, tmp_path: Path
) -> None:
    each_shape(cli, sqs, subscriber, tmp_path)
    sqs.send_message(QueueUrl=subscriber.dlq, MessageBody="left here by hand")
    before = drain_and_keep(subscriber)

    result = replay(cli, subscriber, "--dry-run")

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    expected = (
        ("sns-1", "permanent", "PermanentError: the price list is missing"),
        ("sns-2", "on-failure", "RetriesExhausted: RuntimeError: simulated transient"),
        ("sns-3", "lambda-dlq", "RuntimeError: simulated transient"),
        ("sns-4", "sns-redrive", "SNS could not deliver it"),
    )
    for sns_id, shape, reason in expected:
        (row,) = [line for line in lines if f" {sns_id} " in line]
        assert f" {shape} " in row
        assert reason in row
    assert "would replay 4 message(s)" in result.output
    (unknown,) = [line for line in lines if line.startswith("not replayable")]
    assert "[unknown]" in unknown
    assert "dry run: nothing changed" in result.output
    assert subscriber.ran() == []
    after = drain_and_keep(subscriber)
    assert sorted(m["Body"] for m in after) == sorted(m["Body"] for m in before)


def test_a_permanent_failure_replayed_with_its_nonce_runs_again_once(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, tmp_path: Path
) -> None:
    failed = permanent_failure(cli, subscriber, tmp_path, "o-7", "sns-7")

    first = replay(cli, subscriber)
    assert first.exit_code == 0, first.output
    assert subscriber.ran() == ["o-7"]
    assert counts(sqs, subscriber.dlq) == (0, 0)

    resend(sqs, subscriber.dlq, failed)  # the same DLQ message, nonce and all, once more
    second = replay(cli, subscriber)
    assert second.exit_code == 0, second.output
    assert "Returned (duplicate)" in second.output
    assert subscriber.ran() == ["o-7"]


def test_a_forged_nonce_does_not_run_it(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, tmp_path: Path
) -> None:
    failed = permanent_failure(cli, subscriber, tmp_path, "o-8", "sns-8")
    drain(sqs, subscriber.dlq)
    forged = {"eo-replay-nonce": {"DataType": "String", "StringValue": "0123456789abcdef"}}
    resend(sqs, subscriber.dlq, failed, forged)

    result = replay(cli, subscriber)

    assert result.exit_code == 0, result.output
    assert subscriber.ran() == []
    assert "Returned (permanent)" in result.output
    # The layer dead-lettered it again, with the real nonce; this run left that copy alone.
    assert "came back failed" in result.output
    (again,) = drain_and_keep(subscriber)
    assert nonce_of(again) == nonce_of(failed)
    real = replay(cli, subscriber)  # the genuine copy does run, once
    assert real.exit_code == 0, real.output
    assert subscriber.ran() == ["o-8"]


def test_a_message_whose_invocation_fails_stays_in_the_dlq(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed
) -> None:
    failing = sns_event(subscriber.topic_arn, sale("o-5", fail=True), "sns-5")
    lambda_failure(sqs, subscriber, failing, ON_FAILURE_DESTINATION)
    working = sns_event(subscriber.topic_arn, sale("o-6"), "sns-6")
    lambda_failure(sqs, subscriber, working, ON_FAILURE_DESTINATION)

    result = replay(cli, subscriber)

    assert result.exit_code == 1
    assert subscriber.ran() == ["o-6"]
    (failure,) = [line for line in result.output.splitlines() if line.startswith("failed")]
    assert failure.startswith("failed invoke ")
    assert "DeliveryFailed" in failure
    (left,) = drain(sqs, subscriber.dlq)  # visible again, as it was
    assert json.loads(left["Body"])["requestPayload"] == failing


def test_the_rebuilt_event_presents_the_nonce_as_the_subscriber_reads_it() -> None:
    """The permanent shape's attributes, the nonce and a binary one too, in SNS form; the
    layer's own reading of the record finds the nonce, plain or packed into eo-failure."""

    def string(value: str) -> dict[str, Any]:
        return {"DataType": "String", "StringValue": value}

    marks = {
        "eo-error-type": string("PermanentError"),
        "eo-error-message": string("boom"),
        "eo-original-message-id": string("sns-42"),
        "channel": string("web"),
        "blob": {"DataType": "Binary", "BinaryValue": b"\x01\xff"},
    }
    plain = {**marks, "eo-replay-nonce": string("n-1")}
    packed = {**marks, "eo-failure": string(json.dumps({"eo-replay-nonce": "n-2"}))}
    subscription = Subscription("arn:aws:lambda:us-east-1:1:function:f", "arn:aws:sns:x:1:Sales")
    for attributes, nonce in ((plain, "n-1"), (packed, "n-2")):
        message: Any = {"MessageId": "dlq-1", "Body": sale("o-42"), "MessageAttributes": attributes}
        rebuilt = rebuild(message, subscription)
        assert rebuilt.shape == "permanent"
        assert rebuilt.event is not None
        (record,) = rebuilt.event["Records"]
        sns = record["Sns"]
        assert (sns["MessageId"], sns["Message"], sns["TopicArn"]) == (
            "sns-42",
            sale("o-42"),
            "arn:aws:sns:x:1:Sales",
        )
        assert sns["MessageAttributes"]["channel"] == {"Type": "String", "Value": "web"}
        assert sns["MessageAttributes"]["blob"] == {"Type": "Binary", "Value": "Af8="}
        read = from_lambda_record(record)
        assert (read.message_id, read.replay_nonce) == ("sns-42", nonce)


def test_a_consumer_or_an_unknown_name_is_one_line(cli: Invoke, subscriber: Deployed) -> None:
    consumer = cli("replay", "orders")
    assert consumer.exit_code == 2
    assert consumer.output.strip().splitlines() == [
        "error: 'orders' is a queue consumer of stack 'ExactlyOnceSqs', not a topic "
        "subscriber: use `eonce replay copy --consumer orders`"
    ]
    typo = cli("replay", "cpy")
    assert typo.exit_code == 2
    assert typo.output.strip().splitlines() == [
        "error: No such command 'cpy' (copy, native, list, cancel, subscriber), and no "
        "subscriber 'cpy' in stack 'ExactlyOnceSqs'; the subscribers are: salescounter; did "
        "you mean `eonce replay copy`?"
    ]
    explicit = cli("replay", "subscriber", "cpy")
    assert explicit.exit_code == 2
    assert explicit.output.strip().splitlines() == [
        "error: no subscriber 'cpy' in stack 'ExactlyOnceSqs'; the subscribers are: salescounter"
    ]


def test_a_name_that_is_no_command_without_a_stack_says_both(cli: Invoke, sqs: SQSClient) -> None:
    result = cli("replay", "bogus")
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: No such command 'bogus' (copy, native, list, cancel, ")
    assert "no topic subscriber could be looked up: stack 'ExactlyOnceSqs' does not exist" in line
