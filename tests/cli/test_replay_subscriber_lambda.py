"""`eonce replay SUBSCRIBER` against a deployed stack (no LocalDynamoDbEndpoint output): each
rebuilt event goes to `lambda.invoke`, InvocationType Event as SNS invokes a subscriber, or
RequestResponse with --wait; a message leaves the DLQ only once its invocation was accepted.

moto's Lambda runs nothing here (its Docker-free backend answers every call), so the calls are
watched, and failed on purpose, at botocore's `before-call` event.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from moto.core.config import default_user_config

from exactly_once_ops.targets import AwsTarget
from local_aws.sns_delivery import ON_FAILURE_DESTINATION
from tests.cli.support import Invoke, counts, drain, inject_failures
from tests.cli.test_replay_subscriber import (
    Deployed,
    deploy,
    lambda_failure,
    sale,
    sns_event,
    sns_redrive,
)

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef

FAST = ("--wait-seconds", "0")
Hooks = Callable[[Callable[["SQSClient"], None]], None]


@dataclass
class Calls:
    """The Invoke calls the CLI made, and how to answer some of them instead of Lambda."""

    seen: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answers: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    """SNS MessageId -> (HTTP status, parsed response) to return for its event."""

    def before_call(self, params: dict[str, Any], **_: Any) -> Any:
        event = json.loads(params["body"])
        self.seen.append((params["headers"]["X-Amz-Invocation-Type"], event))
        answer = self.answers.get(event["Records"][0]["Sns"]["MessageId"])
        if answer is None:
            return None  # on to moto
        status, parsed = answer
        return AWSResponse("https://lambda.invalid", status, HTTPHeaders(), None), parsed

    def events(self) -> dict[str, dict[str, Any]]:
        return {event["Records"][0]["Sns"]["MessageId"]: event for _, event in self.seen}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    """Every Lambda client the CLI makes reports its Invoke calls here."""
    watched = Calls()
    original = AwsTarget.client

    def client(self: AwsTarget, service: str, endpoint: Any = None) -> Any:
        made = original(self, service, endpoint)
        if service == "lambda":
            made.meta.events.register("before-call.lambda.Invoke", watched.before_call)
        return made

    monkeypatch.setattr(AwsTarget, "client", client)
    return watched


@pytest.fixture
def subscriber(
    sqs: SQSClient,
    cloudformation: CloudFormationClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Deployed:
    """Deployed to "AWS": no LocalDynamoDbEndpoint output, so the function is invoked."""
    monkeypatch.setitem(default_user_config["lambda"], "use_docker", False)
    environment = {
        "IDEMPOTENCY_TABLE": "idempotency",
        "SUBSCRIBER_SCOPE": "sales",
        "RUNS_FILE": str(tmp_path / "runs.txt"),
        "BROKEN_FILE": str(tmp_path / "broken"),
    }
    return deploy(sqs, cloudformation, tmp_path, environment)


def string(value: str) -> MessageAttributeValueTypeDef:
    return {"DataType": "String", "StringValue": value}


def handler_failure(sqs: SQSClient, deployed: Deployed, order_id: str, message_id: str) -> None:
    """A permanent failure as the layer dead-letters it: the Message, SNS attributes, eo-*."""
    sqs.send_message(
        QueueUrl=deployed.dlq,
        MessageBody=sale(order_id),
        MessageAttributes={
            "channel": string("web"),
            "eo-error-type": string("PermanentError"),
            "eo-error-message": string("the price list is missing"),
            "eo-consumer": string("sales"),
            "eo-original-message-id": string(message_id),
            "eo-attempt": {"DataType": "Number", "StringValue": "1"},
            "eo-replay-nonce": string("5f0c2a9e41d7b3c8"),
        },
    )


def fill(sqs: SQSClient, deployed: Deployed) -> dict[str, dict[str, Any]]:
    """One message of each shape; returns the events SNS had sent for the Lambda ones."""
    handler_failure(sqs, deployed, "o-1", "sns-1")
    on_failure = sns_event(deployed.topic_arn, sale("o-2"), "sns-2")
    lambda_failure(sqs, deployed, on_failure, ON_FAILURE_DESTINATION)
    sns_redrive(sqs, deployed, sale("o-3"), "sns-3")
    return {"sns-2": on_failure}


def test_each_shape_is_invoked_as_sns_invokes_then_deleted(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, calls: Calls
) -> None:
    sent = fill(sqs, subscriber)

    result = cli("replay", "SalesCounter", *FAST)

    assert result.exit_code == 0, result.output
    assert "InvocationType Event" in result.output
    assert [kind for kind, _ in calls.seen] == ["Event"] * 3
    events = calls.events()
    assert events["sns-2"] == sent["sns-2"]  # the on-failure record's requestPayload, as it is
    permanent = events["sns-1"]["Records"][0]
    assert permanent["EventSubscriptionArn"].startswith(subscriber.topic_arn + ":")
    sns = permanent["Sns"]
    assert (sns["TopicArn"], sns["Message"]) == (subscriber.topic_arn, sale("o-1"))
    assert sns["MessageAttributes"]["eo-replay-nonce"] == {
        "Type": "String",
        "Value": "5f0c2a9e41d7b3c8",
    }
    assert sns["MessageAttributes"]["channel"] == {"Type": "String", "Value": "web"}
    redriven = events["sns-3"]["Records"][0]
    assert (redriven["EventSource"], redriven["Sns"]["Message"]) == ("aws:sns", sale("o-3"))
    assert counts(sqs, subscriber.dlq) == (0, 0)
    assert result.output.count(" Queued ") == 3


def test_an_invocation_lambda_refuses_stays_in_the_dlq(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, calls: Calls
) -> None:
    fill(sqs, subscriber)
    refused = {"Error": {"Code": "KMSAccessDeniedException", "Message": "key disabled"}}
    calls.answers["sns-2"] = (400, refused)

    result = cli("replay", "SalesCounter", *FAST)

    assert result.exit_code == 1
    (failure,) = [line for line in result.output.splitlines() if line.startswith("failed")]
    assert failure.startswith("failed invoke ")
    assert failure.endswith(": KMSAccessDeniedException: key disabled")
    (left,) = drain(sqs, subscriber.dlq)
    assert "requestPayload" in json.loads(left["Body"])


def test_wait_keeps_a_message_whose_function_fails(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, calls: Calls
) -> None:
    fill(sqs, subscriber)
    error = b'{"errorType": "DeliveryFailed", "errorMessage": "sns-3: failed"}'
    calls.answers["sns-3"] = (
        200,
        {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": io.BytesIO(error)},
    )
    summary = b'{"processed": 1}'
    calls.answers["sns-1"] = (200, {"StatusCode": 200, "Payload": io.BytesIO(summary)})

    result = cli("replay", "SalesCounter", "--wait", *FAST)

    assert result.exit_code == 1
    assert [kind for kind, _ in calls.seen] == ["RequestResponse"] * 3
    assert "Returned (processed)" in result.output
    (failure,) = [line for line in result.output.splitlines() if line.startswith("failed")]
    assert "FunctionError" in failure
    assert "DeliveryFailed" in failure
    (left,) = drain(sqs, subscriber.dlq)
    assert json.loads(left["Body"])["MessageId"] == "sns-3"


def test_a_dry_run_invokes_nothing_and_changes_nothing(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, calls: Calls
) -> None:
    fill(sqs, subscriber)

    result = cli("replay", "SalesCounter", "--dry-run", *FAST)

    assert result.exit_code == 0, result.output
    assert calls.seen == []
    assert "would replay 3 message(s)" in result.output
    assert counts(sqs, subscriber.dlq) == (3, 0)


def test_a_failed_delete_is_reported_and_the_message_stays(
    cli: Invoke, sqs: SQSClient, subscriber: Deployed, calls: Calls, sqs_hooks: Hooks
) -> None:
    handler_failure(sqs, subscriber, "o-9", "sns-9")
    sqs_hooks(lambda client: inject_failures(client, "DeleteMessageBatch", lambda _: True))

    result = cli("replay", "SalesCounter", *FAST)

    assert result.exit_code == 1
    assert len(calls.seen) == 1
    (failure,) = [line for line in result.output.splitlines() if line.startswith("failed")]
    assert failure.startswith("failed delete ")
    assert "invoked but still in the DLQ" in failure
    assert counts(sqs, subscriber.dlq) == (1, 0)


def test_several_topics_and_no_subscription_leave_permanent_ones_in_place(
    cli: Invoke,
    sqs: SQSClient,
    cloudformation: CloudFormationClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    calls: Calls,
) -> None:
    """Which topic a `permanent` message came from is not on it: with two topics and no
    subscription to tell, it stays (exit 1) unless --topic-arn names the topic."""
    monkeypatch.setitem(default_user_config["lambda"], "use_docker", False)
    environment = {"RUNS_FILE": str(tmp_path / "r"), "BROKEN_FILE": str(tmp_path / "b")}
    other = "arn:aws:sns:us-east-1:123456789012:Returns"
    deployed = deploy(sqs, cloudformation, tmp_path, environment, {"ReturnsTopicArn": other})
    handler_failure(sqs, deployed, "o-4", "sns-4")

    stuck = cli("replay", "SalesCounter", *FAST)
    assert stuck.exit_code == 1
    assert "pass --topic-arn" in stuck.output
    assert calls.seen == []

    named = cli("replay", "SalesCounter", "--topic-arn", deployed.topic_arn, *FAST)
    assert named.exit_code == 0, named.output
    ((_, event),) = calls.seen
    assert event["Records"][0]["Sns"]["TopicArn"] == deployed.topic_arn
    assert counts(sqs, deployed.dlq) == (0, 0)
