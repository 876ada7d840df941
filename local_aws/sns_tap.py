"""Tap queues: how the local stack receives a topic's messages for a directly subscribed Lambda.

On AWS, SNS invokes a subscribed function itself. moto cannot run the function (it would try
Docker on every publish), so for each subscriber of `infra/topics.py` the local stack:

- reads the deployed function from moto: environment, timeout, handler, its asynchronous
  retry count (`MaximumRetryAttempts`, else the registry's) and where an event goes after its
  last retry: the on-failure destination, else the function's `DeadLetterConfig`, else the
  `<Subscriber>DeadLetterQueueUrl` output, which `IdempotentSubscriber` makes its on-failure
  destination (moto's CloudFormation does not keep an EventInvokeConfig);
- takes the function's Lambda subscription out of moto, keeping its ARN for the events;
- subscribes a queue of its own to the topic in its place (RawMessageDelivery false, so each
  message arrives as the SNS envelope, MessageId and attributes included).

The tap is subscribed before anything is published, and moto fans each publish out to it
synchronously, so no message is missed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from exactly_once_cdk.outputs import DEAD_LETTER_QUEUE_URL, FUNCTION_NAME, TOPIC_ARN
from exactly_once_ops.sns_events import subscription_arn
from local_aws.sns_delivery import (
    DEAD_LETTER_QUEUE,
    ON_FAILURE_DESTINATION,
    RetryPolicy,
    SubscriberBinding,
)

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient

    from infra.topics import SubscriberSpec, TopicSpec

TAP_SUFFIX = "-sns-tap"


def tap_queue_name(stack: str, subscriber: str) -> str:
    """`<stack>-<Subscriber>-sns-tap`, within SQS's 80 characters."""
    return f"{stack}-{subscriber}"[: 80 - len(TAP_SUFFIX)] + TAP_SUFFIX


def queue_url_of_arn(sqs: SQSClient, arn: str) -> str:
    """A queue's URL from its ARN (`arn:aws:sqs:<region>:<account>:<name>`)."""
    _, _, _, _, account, name = arn.split(":", 5)
    return sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]


def take_over_lambda_subscription(sns: Any, topic_arn: str, function_arn: str) -> str | None:
    """Remove the function's subscriptions (any alias) from moto; the ARN of the last one, or
    None when there was none."""
    found = None
    paginator = sns.get_paginator("list_subscriptions_by_topic")
    for page in paginator.paginate(TopicArn=topic_arn):
        for sub in page.get("Subscriptions", []):
            endpoint = str(sub.get("Endpoint", ""))
            if sub.get("Protocol") == "lambda" and (
                endpoint == function_arn or endpoint.startswith(f"{function_arn}:")
            ):
                found = str(sub["SubscriptionArn"])
                sns.unsubscribe(SubscriptionArn=found)
    return found


def subscribe_tap(sns: Any, sqs: SQSClient, topic_arn: str, queue_name: str) -> str:
    """Create the tap queue (or find it) and subscribe it to the topic; its URL."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "false"},
        ReturnSubscriptionArn=True,
    )
    return url


def _output(outputs: Mapping[str, str], name: str, what: str) -> str:
    value = outputs.get(name)
    if not value:
        raise RuntimeError(f"the stack has no {name} output ({what}, infra/topics.py)")
    return value


def invoke_config(lambda_client: LambdaClient, function_name: str) -> dict[str, Any]:
    """The function's asynchronous-invocation settings; empty when it has none."""
    try:
        return dict(lambda_client.get_function_event_invoke_config(FunctionName=function_name))
    except (ClientError, NotImplementedError):
        return {}


def failure_target(
    sqs: SQSClient, config: Mapping[str, Any], async_config: Mapping[str, Any], fallback: str
) -> tuple[str, str]:
    """(queue URL, format) for an event whose retries are exhausted."""
    destination = (
        async_config.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination", "")
    )
    if destination.startswith("arn:aws:sqs:"):
        return queue_url_of_arn(sqs, destination), ON_FAILURE_DESTINATION
    dlq_arn = config.get("DeadLetterConfig", {}).get("TargetArn", "")
    if dlq_arn.startswith("arn:aws:sqs:"):
        return queue_url_of_arn(sqs, dlq_arn), DEAD_LETTER_QUEUE
    return fallback, ON_FAILURE_DESTINATION


def bind_subscriber(
    lambda_client: LambdaClient,
    sns: Any,
    sqs: SQSClient,
    outputs: Mapping[str, str],
    topic: TopicSpec,
    spec: SubscriberSpec,
    *,
    stack: str,
    retry: RetryPolicy,
) -> SubscriberBinding:
    """Read one subscriber's deployed function, put the tap in its place, and bind the two."""
    topic_arn = _output(outputs, f"{topic.id}{TOPIC_ARN}", f"topic {topic.id}")
    name = _output(outputs, f"{spec.id}{FUNCTION_NAME}", f"subscriber {spec.id}")
    config: dict[str, Any] = dict(lambda_client.get_function_configuration(FunctionName=name))
    function_arn = config.get("FunctionArn", name)
    async_config = invoke_config(lambda_client, name)
    dlq_url, failure_format = failure_target(
        sqs,
        config,
        async_config,
        _output(outputs, f"{spec.id}{DEAD_LETTER_QUEUE_URL}", f"subscriber {spec.id}"),
    )
    retries = int(async_config.get("MaximumRetryAttempts", spec.retry_attempts))
    subscription = take_over_lambda_subscription(sns, topic_arn, function_arn)
    return SubscriberBinding(
        subscriber=spec.id,
        function_name=name,
        source_dir=str(spec.source_path),
        handler=config.get("Handler", spec.handler),
        environment=dict(config.get("Environment", {}).get("Variables", {})),
        timeout_s=int(config.get("Timeout", 3)),
        topic_arn=topic_arn,
        subscription_arn=subscription or subscription_arn(topic_arn, function_arn),
        tap_queue_url=subscribe_tap(sns, sqs, topic_arn, tap_queue_name(stack, spec.id)),
        dead_letter_queue_url=dlq_url,
        retry=retry.with_retries(retries),
        topic=topic.id,
        failure_format=failure_format,
        function_arn=function_arn,
    )


def discover_subscriber_bindings(
    lambda_client: LambdaClient,
    sns: Any,
    sqs: SQSClient,
    outputs: Mapping[str, str],
    topics: tuple[TopicSpec, ...],
    *,
    stack: str,
    retry: RetryPolicy,
) -> list[SubscriberBinding]:
    """Every direct subscriber of every topic, each with its tap subscribed."""
    return [
        bind_subscriber(lambda_client, sns, sqs, outputs, topic, spec, stack=stack, retry=retry)
        for topic in topics
        for spec in topic.subscribers
    ]
