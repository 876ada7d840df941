"""`publish` and its core `publish_messages`, against in-process moto SNS (delivering to SQS)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from exactly_once_ops.publish import publish_messages
from exactly_once_ops.send import OutgoingMessage
from exactly_once_ops.sns_events import parse_envelope
from tests.cli.support import REGION, Invoke, drain

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_sqs import SQSClient

TEMPLATE = {
    "Resources": {"Sales": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": "stack-sales"}}},
    "Outputs": {"SalesTopicArn": {"Value": {"Ref": "Sales"}}},
}


@pytest.fixture
def sns(sqs: SQSClient) -> Any:
    """SNS in the same moto mock as `sqs`."""
    return boto3.client("sns", region_name=REGION)


def subscribed_queue(sns: Any, sqs: SQSClient, topic_arn: str) -> str:
    """A queue subscribed to the topic without raw delivery: each message arrives enveloped."""
    url = sqs.create_queue(QueueName=f"{topic_arn.rsplit(':', 1)[-1]}-copy")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn["QueueArn"])
    return url


def envelopes(sqs: SQSClient, url: str) -> list[dict[str, Any]]:
    found = [parse_envelope(m["Body"]) for m in drain(sqs, url)]
    assert all(found)
    return [e for e in found if e is not None]


@pytest.fixture
def stack_topic(cloudformation: CloudFormationClient, sns: Any) -> str:
    """A tiny stack whose output names a topic as the CDK app does; the topic's ARN."""
    cloudformation.create_stack(StackName="ExactlyOnceSqs", TemplateBody=json.dumps(TEMPLATE))
    outputs = cloudformation.describe_stacks(StackName="ExactlyOnceSqs")["Stacks"][0]["Outputs"]
    return next(o["OutputValue"] for o in outputs if o["OutputKey"] == "SalesTopicArn")


def one_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    assert "Traceback" not in output
    return lines[0]


def test_bodies_attributes_and_subject_arrive_in_each_envelope(
    cli: Invoke, sns: Any, sqs: SQSClient
) -> None:
    topic = sns.create_topic(Name="sales")["TopicArn"]
    copy = subscribed_queue(sns, sqs, topic)
    result = cli(
        "publish",
        "--topic-arn",
        topic,
        "--body",
        '{"orderId": "o-1"}',
        "--body",
        '{"orderId": "o-2"}',
        "--attribute",
        "channel=web",
        "--attribute",
        "priority:Number=2",
        "--subject",
        "sale",
    )
    assert result.exit_code == 0, result.output
    assert "published" in result.output
    got = sorted(envelopes(sqs, copy), key=lambda e: str(e["Message"]))
    assert [e["Message"] for e in got] == ['{"orderId": "o-1"}', '{"orderId": "o-2"}']
    assert {e["Subject"] for e in got} == {"sale"}
    assert got[0]["MessageAttributes"] == {
        "channel": {"Type": "String", "Value": "web"},
        "priority": {"Type": "Number", "Value": "2"},
    }
    assert len({e["MessageId"] for e in got}) == 2


def test_a_topic_of_the_stack_by_its_id_with_generated_duplicates(
    cli: Invoke, sns: Any, sqs: SQSClient, stack_topic: str, tmp_path: Path
) -> None:
    copy = subscribed_queue(sns, sqs, stack_topic)
    ids = tmp_path / "ids.jsonl"
    result = cli(
        "publish",
        "--topic",
        "sales",
        "--count",
        "10",
        "--duplicates",
        "0.3",
        "--key-prefix",
        "s-",
        "--seed",
        "3",
        "--ids-out",
        str(ids),
    )
    assert result.exit_code == 0, result.output
    got = envelopes(sqs, copy)
    keys = Counter(json.loads(e["Message"])["orderId"] for e in got)
    assert sum(keys.values()) == 10
    assert len(keys) == 7  # three sales published a second time, each with a new MessageId
    assert len({e["MessageId"] for e in got}) == 10
    lines = [json.loads(line) for line in ids.read_text().splitlines()]
    assert [line["index"] for line in lines] == list(range(10))
    assert {line["messageId"] for line in lines} == {e["MessageId"] for e in got}


def test_publish_messages_accounts_for_every_batch(sns: Any, sqs: SQSClient) -> None:
    topic = sns.create_topic(Name="many")["TopicArn"]
    copy = subscribed_queue(sns, sqs, topic)
    messages = [OutgoingMessage(body=json.dumps({"orderId": f"o-{n}"})) for n in range(23)]
    report = publish_messages(sns, topic, messages, concurrency=3)
    assert (report.sent, report.failed) == (23, [])
    assert sorted(report.message_ids, key=int) == [str(n) for n in range(23)]
    assert len(envelopes(sqs, copy)) == 23


def test_entries_the_topic_refuses_are_reported_and_exit_1(cli: Invoke, sns: Any) -> None:
    missing = f"arn:aws:sns:{REGION}:123456789012:no-such-topic"
    result = cli("publish", "--topic-arn", missing, "--body", "{}", "--body", "[]")
    assert result.exit_code == 1
    assert "failed entry 0: NotFound" in result.output
    assert "failed entry 1: NotFound" in result.output


def test_a_fifo_topic_takes_a_group_and_dedup_ids(cli: Invoke, sns: Any) -> None:
    topic = sns.create_topic(
        Name="sales.fifo", Attributes={"FifoTopic": "true", "ContentBasedDeduplication": "false"}
    )["TopicArn"]
    result = cli("publish", "--topic-arn", topic, "--group-id", "g", "--body", "{}", "--body", "[]")
    assert result.exit_code == 0, result.output
    refused = cli("publish", "--topic-arn", topic, "--body", "{}")
    assert refused.exit_code == 2
    assert one_line(refused.output) == "error: a FIFO topic needs --group-id"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["publish", "--body", "{}"], "name the topic: --topic-arn ARN, or --topic NAME"),
        (
            ["publish", "--topic", "refunds", "--body", "{}"],
            "no topic 'refunds' in stack 'ExactlyOnceSqs'; the topics are: sales",
        ),
        (["publish", "--topic", "refunds", "--count", "3"], "'refunds' needs --template"),
        (["publish", "--topic", "sales"], "give exactly one of --body, --file, --jsonl"),
        (
            ["publish", "--topic", "sales", "--body", "{}", "--group-id", "g"],
            "--group-id and --dedup-id are for FIFO topics",
        ),
        (
            ["publish", "--topic", "sales", "--body", "{}", "--attribute", "x"],
            "expected Name=Value",
        ),
        (["publish", "--topic", "sales", "--body", "{}", "--subject", " "], "--subject cannot"),
        (["publish", "--topic", "sales", "--count", "4", "--duplicates", "1"], "--duplicates"),
    ],
)
def test_bad_arguments_are_one_line(
    cli: Invoke, stack_topic: str, args: list[str], message: str
) -> None:
    result = cli(*args)
    assert result.exit_code == 2
    line = one_line(result.output)
    assert line.startswith("error: ")
    assert message in line
