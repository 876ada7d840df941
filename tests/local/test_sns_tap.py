"""The local SNS → Lambda path end to end on a moto server: the tap queue takes the Lambda
subscription's place, worker processes deliver each published message to the function's code,
a duplicate delivery runs once, a failure is retried and then dead-lettered with its error, and
a permanent failure is dead-lettered by the handler without retries.

The function's code is a small fake written by the test (the subscriber contract only), so the
path is tested apart from the library's handler; the e2e tests run the real one.
"""

from __future__ import annotations

import io
import json
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from exactly_once_cdk.outputs import KIND_SUBSCRIBER
from exactly_once_ops.app_model import DeployedApp, Function, Subscriber, Topic
from exactly_once_ops.sns_events import parse_envelope
from local_aws.demo import failure_reason
from local_aws.moto_server import REGION, MotoServer, aws_env
from local_aws.sns_delivery import (
    DEAD_LETTER_QUEUE,
    ON_FAILURE_DESTINATION,
    RetryPolicy,
    SubscriberBinding,
)
from local_aws.sns_tap import bind_subscriber, failure_target, invoke_config, tap_queue_name
from local_aws.sns_worker import SnsDelivery, visibility_timeout
from tests.waiting import wait_until

FAKE_HANDLER = textwrap.dedent(
    '''
    """Runs each SNS MessageId once (a marker file), raises for "fail", dead-letters non-JSON."""
    import json, os, uuid
    from pathlib import Path
    import boto3

    def handle(event, context):
        sns = event["Records"][0]["Sns"]
        runs = Path(os.environ["RUNS_DIR"])
        try:
            sale = json.loads(sns["Message"])
        except ValueError:
            boto3.client("sqs").send_message(
                QueueUrl=os.environ["DEAD_LETTER_QUEUE_URL"],
                MessageBody=sns["Message"],
                MessageAttributes={
                    "eo-error-type": {"DataType": "String", "StringValue": "NonJsonMessage"}
                },
            )
            return {"permanent": 1}
        if sale.get("fail"):
            (runs / f"attempt-{uuid.uuid4().hex}").write_text(context.aws_request_id)
            raise RuntimeError(f"cannot count {sale['orderId']} yet")
        try:
            fd = os.open(runs / sns["MessageId"], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return {"duplicate": 1}
        os.write(fd, sns["Message"].encode())
        os.close(fd)
        return {"processed": 1}
    '''
)


class Moto:
    def __init__(self, server: MotoServer) -> None:
        self.server = server

    def client(self, service: str) -> Any:
        return boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=self.server.endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )


@pytest.fixture(scope="module")
def moto() -> Iterator[Moto]:
    with MotoServer() as server:
        yield Moto(server)


def create_function(moto: Moto, name: str, environment: dict[str, str], **extra: Any) -> str:
    role = moto.client("iam").create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("handler.py", FAKE_HANDLER)
    created = moto.client("lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler="handler.handle",
        Code={"ZipFile": code.getvalue()},
        Timeout=3,
        Environment={"Variables": environment},
    )
    return str(created["FunctionArn"])


def messages(moto: Moto, url: str) -> list[dict[str, Any]]:
    got = moto.client("sqs").receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=0
    )
    return list(got.get("Messages", []))


def test_published_messages_reach_the_function_through_its_tap(moto: Moto, tmp_path: Path) -> None:
    sns, sqs = moto.client("sns"), moto.client("sqs")
    topic_arn = sns.create_topic(Name="Sales")["TopicArn"]
    dlq = sqs.create_queue(QueueName="sales-counter-dlq")["QueueUrl"]
    source = tmp_path / "function"
    source.mkdir()
    (source / "handler.py").write_text(FAKE_HANDLER, encoding="utf-8")
    runs = tmp_path / "runs"
    runs.mkdir()
    env = {"RUNS_DIR": str(runs), "DEAD_LETTER_QUEUE_URL": dlq}
    function_arn = create_function(moto, "sales-counter", env)
    lambda_sub = sns.subscribe(TopicArn=topic_arn, Protocol="lambda", Endpoint=function_arn)

    # The deployed app as its template says it (exactly_once_ops.app_model), bound to moto's names.
    function = Function("CounterFn", KIND_SUBSCRIBER, "handler.handle", source, {})
    subscriber = Subscriber("SalesCounter", function, "SalesTopic", 2, "CounterDlq")
    app = DeployedApp(
        stack_name="Test",
        assembly_dir=tmp_path,
        subscribers=(subscriber,),
        topics=(Topic("Sales", "SalesTopic", (), ("SalesCounter",)),),
        physical_ids={"SalesTopic": topic_arn, "CounterFn": "sales-counter", "CounterDlq": dlq},
    )
    binding = bind_subscriber(
        moto.client("lambda"),
        sns,
        sqs,
        app,
        subscriber,
        stack="Test",
        retry=RetryPolicy(delays_s=(0.1, 0.2)),
    )
    # The tap stands in for the Lambda subscription, whose ARN the events carry.
    assert binding.subscription_arn == lambda_sub["SubscriptionArn"]
    subscriptions = sns.list_subscriptions_by_topic(TopicArn=topic_arn)["Subscriptions"]
    assert [s["Protocol"] for s in subscriptions] == ["sqs"]
    assert binding.tap_queue_url.endswith(tap_queue_name("Test", "SalesCounter"))
    assert binding.environment == env
    assert (binding.timeout_s, binding.retry.retries) == (3, 2)
    assert (binding.dead_letter_queue_url, binding.failure_format) == (dlq, ON_FAILURE_DESTINATION)

    sale = json.dumps({"orderId": "o-1", "amount": 3})
    published = sns.publish(TopicArn=topic_arn, Message=sale, Subject="sale")["MessageId"]
    sns.publish(TopicArn=topic_arn, Message=json.dumps({"orderId": "o-2", "fail": True}))
    sns.publish(TopicArn=topic_arn, Message="not JSON {")
    # SNS delivers at least once: the same message (same MessageId) a second time.
    (tapped,) = [m for m in messages(moto, binding.tap_queue_url) if published in m["Body"]]
    sqs.send_message(QueueUrl=binding.tap_queue_url, MessageBody=tapped["Body"])

    with SnsDelivery(
        [binding], aws_env(moto.server.endpoint), workers=2, log_dir=tmp_path / "logs"
    ) as delivery:

        def finished() -> dict[str, int] | None:
            totals = delivery.totals_by_subscriber()["SalesCounter"]
            return dict(totals) if totals["delivered"] == 4 else None

        totals = wait_until(
            finished, lambda: (delivery.totals_by_subscriber(), list(runs.iterdir()))
        )

    assert (runs / published).read_text() == sale  # ran once, for both deliveries
    attempts = [p.read_text() for p in runs.iterdir() if p.name.startswith("attempt-")]
    assert len(attempts) == 3
    assert len(set(attempts)) == 1  # Lambda's retries keep the request id
    assert totals["attempts"] == 1 + 1 + 3 + 1
    assert (totals["raised"], totals["dead_lettered"], totals["malformed"]) == (3, 1, 0)
    dead = {failure_reason(m): m for m in messages(moto, dlq)}
    assert set(dead) == {"NonJsonMessage", "RetriesExhausted"}
    assert dead["NonJsonMessage"]["Body"] == "not JSON {"
    # No EventInvokeConfig in moto: the template's on-failure destination (the subscriber's DLQ)
    record = json.loads(dead["RetriesExhausted"]["Body"])
    assert record["responsePayload"]["errorMessage"] == "cannot count o-2 yet"
    assert record["requestContext"]["requestId"] == attempts[0]
    assert record["requestContext"]["functionArn"] == f"{function_arn}:$LATEST"
    failed_event = record["requestPayload"]
    assert json.loads(failed_event["Records"][0]["Sns"]["Message"])["orderId"] == "o-2"
    assert messages(moto, binding.tap_queue_url) == []


def test_a_tap_message_that_is_no_envelope_is_dropped_and_counted(
    moto: Moto, tmp_path: Path
) -> None:
    sqs = moto.client("sqs")
    tap = sqs.create_queue(QueueName="stray-tap")["QueueUrl"]
    source = tmp_path / "function"
    source.mkdir()
    (source / "handler.py").write_text(FAKE_HANDLER, encoding="utf-8")
    binding = SubscriberBinding(
        subscriber="SalesCounter",
        function_name="stray",
        source_dir=str(source),
        handler="handler.handle",
        environment={"RUNS_DIR": str(tmp_path)},
        timeout_s=3,
        topic_arn="arn:aws:sns:us-east-1:123456789012:Sales",
        subscription_arn="arn:aws:sns:us-east-1:123456789012:Sales:x",
        tap_queue_url=tap,
        dead_letter_queue_url=tap,
    )
    assert parse_envelope('{"orderId": "o-1"}') is None
    sqs.send_message(QueueUrl=tap, MessageBody='{"orderId": "o-1"}')
    with SnsDelivery([binding], aws_env(moto.server.endpoint), workers=1, log_dir=tmp_path) as d:
        wait_until(
            lambda: d.totals_by_subscriber()["SalesCounter"]["malformed"] == 1,
            d.totals_by_subscriber,
        )
    assert messages(moto, tap) == []
    assert visibility_timeout(binding) == 3 * 3 + 1 + 30  # 3 attempts, 1.5 s of waits


def test_the_failure_target_and_retries_come_from_the_deployed_function(moto: Moto) -> None:
    sqs, lambda_client = moto.client("sqs"), moto.client("lambda")
    urls = {n: sqs.create_queue(QueueName=f"target-{n}")["QueueUrl"] for n in ("dlq", "dest")}
    arns = {
        n: sqs.get_queue_attributes(QueueUrl=u, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        for n, u in urls.items()
    }
    create_function(moto, "with-dlq", {})
    assert invoke_config(lambda_client, "with-dlq") == {}
    # moto leaves DeadLetterConfig out of the configuration it returns; AWS includes it
    config = {"DeadLetterConfig": {"TargetArn": arns["dlq"]}}
    assert failure_target(sqs, config, {}, "fallback") == (urls["dlq"], DEAD_LETTER_QUEUE)

    lambda_client.put_function_event_invoke_config(
        FunctionName="with-dlq",
        MaximumRetryAttempts=1,
        DestinationConfig={"OnFailure": {"Destination": arns["dest"]}},
    )
    async_config = invoke_config(lambda_client, "with-dlq")
    assert async_config["MaximumRetryAttempts"] == 1
    assert failure_target(sqs, config, async_config, "fallback") == (
        urls["dest"],
        ON_FAILURE_DESTINATION,
    )
    assert failure_target(sqs, {}, {}, "fallback") == ("fallback", ON_FAILURE_DESTINATION)
    with pytest.raises(RuntimeError, match="no on-failure destination or dead-letter queue"):
        failure_target(sqs, {"FunctionName": "lost"}, {}, None)
