"""Tap queues: how the local stack receives a topic's messages for a directly subscribed Lambda.

On AWS, SNS invokes a subscribed function itself. moto cannot run the function (it would try
Docker on every publish), so for each subscriber of the deployed app (`local_aws.cloud_assembly`)
the local stack:

- reads the deployed function from moto: environment, timeout, handler, its asynchronous
  retry count (`MaximumRetryAttempts`, else the template's EventInvokeConfig's) and where an
  event goes after its last retry: the on-failure destination, else the function's
  `DeadLetterConfig`, else the template's on-failure destination (moto's CloudFormation does
  not keep an EventInvokeConfig, so the template is where `IdempotentSubscriber`'s DLQ shows);
- takes the function's Lambda subscription out of moto, keeping its ARN for the events;
- subscribes a queue of its own to the topic in its place (RawMessageDelivery false, so each
  message arrives as the SNS envelope, MessageId and attributes included), with the Lambda
  subscription's filter policy, so the function hears only what SNS would have sent it.

The tap is subscribed before anything is published, and moto fans each publish out to it
synchronously, so no message is missed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from exactly_once_ops.handlers import deployed_environment
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

    from exactly_once_ops.app_model import DeployedApp, Subscriber

TAP_SUFFIX = "-sns-tap"


def tap_queue_name(stack: str, subscriber: str) -> str:
    """`<stack>-<Subscriber>-sns-tap`, within SQS's 80 characters."""
    return f"{stack}-{subscriber}"[: 80 - len(TAP_SUFFIX)] + TAP_SUFFIX


def queue_url_of_arn(sqs: SQSClient, arn: str) -> str:
    """A queue's URL from its ARN (`arn:aws:sqs:<region>:<account>:<name>`)."""
    _, _, _, _, account, name = arn.split(":", 5)
    return sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]


FILTER_ATTRIBUTES = ("FilterPolicy", "FilterPolicyScope")
"""What a Lambda subscription filters by, which the tap in its place must keep: SNS never
invokes the function with a message the policy rejects."""


def take_over_lambda_subscription(
    sns: Any, topic_arn: str, function_arn: str
) -> tuple[str | None, dict[str, str]]:
    """Remove the function's subscriptions (any alias) from moto; the ARN of the last one (None
    when there was none) and its filter policy attributes."""
    found, filters = None, {}
    paginator = sns.get_paginator("list_subscriptions_by_topic")
    for page in paginator.paginate(TopicArn=topic_arn):
        for sub in page.get("Subscriptions", []):
            endpoint = str(sub.get("Endpoint", ""))
            if sub.get("Protocol") == "lambda" and (
                endpoint == function_arn or endpoint.startswith(f"{function_arn}:")
            ):
                found = str(sub["SubscriptionArn"])
                attributes = sns.get_subscription_attributes(SubscriptionArn=found)["Attributes"]
                filters = {k: str(attributes[k]) for k in FILTER_ATTRIBUTES if attributes.get(k)}
                sns.unsubscribe(SubscriptionArn=found)
    return found, filters


def subscribe_tap(
    sns: Any,
    sqs: SQSClient,
    topic_arn: str,
    queue_name: str,
    filters: Mapping[str, str] | None = None,
) -> str:
    """Create the tap queue (or find it) and subscribe it to the topic, with the filter policy
    of the subscription it stands in for; its URL."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sns.subscribe(
        TopicArn=topic_arn,
        Protocol="sqs",
        Endpoint=arn,
        Attributes={"RawMessageDelivery": "false", **(filters or {})},
        ReturnSubscriptionArn=True,
    )
    return url


def invoke_config(lambda_client: LambdaClient, function_name: str) -> dict[str, Any]:
    """The function's asynchronous-invocation settings; empty when it has none."""
    try:
        return dict(lambda_client.get_function_event_invoke_config(FunctionName=function_name))
    except (ClientError, NotImplementedError):
        return {}


def failure_target(
    sqs: SQSClient,
    config: Mapping[str, Any],
    async_config: Mapping[str, Any],
    fallback: str | None,
) -> tuple[str, str]:
    """(queue URL, format) for an event whose retries are exhausted; `fallback` is the
    template's on-failure queue, for an emulator that kept no EventInvokeConfig."""
    destination = (
        async_config.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination", "")
    )
    if destination.startswith("arn:aws:sqs:"):
        return queue_url_of_arn(sqs, destination), ON_FAILURE_DESTINATION
    dlq_arn = config.get("DeadLetterConfig", {}).get("TargetArn", "")
    if dlq_arn.startswith("arn:aws:sqs:"):
        return queue_url_of_arn(sqs, dlq_arn), DEAD_LETTER_QUEUE
    if fallback is None:
        raise RuntimeError(
            f"{config.get('FunctionName', 'the function')} has no on-failure destination or "
            "dead-letter queue: an event whose retries run out would be lost"
        )
    return fallback, ON_FAILURE_DESTINATION


def bind_subscriber(
    lambda_client: LambdaClient,
    sns: Any,
    sqs: SQSClient,
    app: DeployedApp,
    subscriber: Subscriber,
    *,
    stack: str,
    retry: RetryPolicy,
) -> SubscriberBinding:
    """Read one subscriber's deployed function, put the tap in its place, and bind the two."""
    topic = app.topic_of(subscriber)
    topic_arn = app.physical_id(topic.logical_id)
    name = app.physical_id(subscriber.function.logical_id)
    config: dict[str, Any] = dict(lambda_client.get_function_configuration(FunctionName=name))
    function_arn = config.get("FunctionArn", name)
    async_config = invoke_config(lambda_client, name)
    destination = subscriber.failure_destination
    dlq_url, failure_format = failure_target(
        sqs, config, async_config, None if destination is None else app.physical_id(destination)
    )
    retries = int(async_config.get("MaximumRetryAttempts", subscriber.retry_attempts))
    subscription, filters = take_over_lambda_subscription(sns, topic_arn, function_arn)
    return SubscriberBinding(
        subscriber=subscriber.id,
        function_name=name,
        source_dir=str(subscriber.function.code_folder()),
        handler=config.get("Handler", subscriber.function.handler),
        environment=deployed_environment(config, subscriber.function.layer_dirs),
        timeout_s=int(config.get("Timeout", 3)),
        topic_arn=topic_arn,
        subscription_arn=subscription or subscription_arn(topic_arn, function_arn),
        tap_queue_url=subscribe_tap(
            sns, sqs, topic_arn, tap_queue_name(stack, subscriber.id), filters
        ),
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
    app: DeployedApp,
    *,
    stack: str,
    retry: RetryPolicy,
) -> list[SubscriberBinding]:
    """Every direct subscriber of every topic, each with its tap subscribed."""
    return [
        bind_subscriber(lambda_client, sns, sqs, app, subscriber, stack=stack, retry=retry)
        for subscriber in app.subscribers
    ]
