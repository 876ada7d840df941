"""`IdempotentTopic`: an SNS topic under its own customer-managed key, SSL-only, that fans out
to `IdempotentConsumer` queues.

SNS delivers at least once, and a fan-out delivers each message once per subscriber: the
consumers behind it keep their effects single with the SNS MessageId or a business key (the
library unwraps the SNS envelope). Direct Lambda subscribers are `IdempotentSubscriber`s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from aws_cdk import Annotations, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from exactly_once_cdk import outputs as names
from exactly_once_cdk.alarms import ALARM_PERIOD, ONE_EVENT, add_alarm
from exactly_once_cdk.consumer import IdempotentConsumer
from exactly_once_cdk.local_mode import on_local_stack

SNS_PRINCIPAL = "sns.amazonaws.com"


SNS_ENVELOPE = "SNS_ENVELOPE"  # the consumer setting (exactly_once.config) it turns on


class IdempotentTopic(Construct):
    """A standard topic encrypted with a customer-managed key (rotated), refusing non-TLS
    requests, with an alarm when SNS gives up delivering to a subscriber.

    The key is customer-managed so that its policy can be read and extended (the AWS-managed
    `aws/sns` key cannot be shared with other services or accounts). Publishers need
    `grant_publish`: sns:Publish on the topic and the key's GenerateDataKey and Decrypt.
    With `outputs`, the stack gets `<Id>TopicArn`. `topic_props` overrides or adds any
    `sns.Topic` keyword.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        display_name: str | None = None,
        master_key: kms.IKey | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        alarm_topic: sns.ITopic | None = None,
        outputs: bool = True,
        topic_props: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = construct_id
        self.key: kms.IKey = master_key or kms.Key(
            self,
            "Key",
            description=f"Encrypts the {construct_id} topic",
            enable_key_rotation=True,
            removal_policy=removal_policy,
            pending_window=Duration.days(7),
        )
        self.topic = sns.Topic(
            self,
            "Topic",
            **{
                "display_name": display_name or construct_id,
                "enforce_ssl": True,
                **(topic_props or {}),
                "master_key": self.key,  # the key `grant_publish` grants
            },
        )
        cast(sns.CfnTopic, self.topic.node.default_child).add_metadata(
            names.ENTRY_POINT_METADATA, {"kind": names.KIND_TOPIC, "id": construct_id}
        )
        self._inline: list[sns.CfnTopic.SubscriptionProperty] = []
        self.subscriptions: list[sns.Subscription] = []
        self.alarms = [
            add_alarm(
                self,
                "DeliveryFailuresAlarm",
                metric=self.topic.metric_number_of_notifications_failed(
                    period=ALARM_PERIOD, statistic="Sum"
                ),
                threshold=1,
                description=f"{construct_id}: SNS gave up delivering to a subscriber (retries "
                "exhausted, or a permission or key refused it)",
                topic=alarm_topic,
                evaluation_periods=ONE_EVENT.periods,  # a notification lost to a subscriber
                datapoints_to_alarm=ONE_EVENT.datapoints,
            )
        ]
        if outputs:
            CfnOutput(
                Stack.of(self), f"{construct_id}{names.TOPIC_ARN}", value=self.topic.topic_arn
            )

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """Publish, written out: `Topic.grant_publish` adds `kms:GenerateDataKey*` (a wildcard)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["sns:Publish"], resources=[self.topic.topic_arn])
        )
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey"], resources=[self.key.key_arn]
            )
        )

    def subscribe_queue(
        self,
        consumer: IdempotentConsumer,
        *,
        raw_message_delivery: bool = False,
        filter_policy: Mapping[str, sns.SubscriptionFilter] | None = None,
        dead_letter_queue: sqs.IQueue | None = None,
        inline: bool | None = None,
    ) -> sns.Subscription | None:
        """Subscribe the consumer's queue; SNS may then send to it (a queue policy statement
        scoped to this topic). The queues use SSE-SQS, which SNS writes to with no key grant.

        Without `raw_message_delivery` the queue receives the SNS envelope (the consumer
        unwraps it); with it, the message alone and SNS attributes as SQS attributes.
        `dead_letter_queue` keeps what SNS could not deliver (SNS retries SQS for days first).

        `inline` writes the subscription into the topic's own `Subscription` property instead
        of an `AWS::SNS::Subscription`: for emulators whose CloudFormation has no subscription
        resource (moto). That property has no attributes, so it takes none of the options.
        Left unset, `inline` follows the app's `localStack` context
        (`exactly_once_cdk.local_mode`): inline in the local emulator, where the options
        given are left out with a warning (the consumer reads an enveloped body as a raw one,
        and a filter policy is not applied there), an `AWS::SNS::Subscription` elsewhere.
        """
        queue = consumer.queue
        if queue.fifo:
            raise ValueError(
                f"{self.name}: {consumer.name}'s queue is FIFO, and SNS delivers to FIFO queues "
                "only from FIFO topics"
            )
        # The consumer reads the notification inside an envelope (the library's default is
        # off, so that a queue never starts unwrapping by surprise); with raw delivery there is
        # none, and auto leaves a raw body as it is.
        consumer.function.add_environment(SNS_ENVELOPE, "auto")
        if inline is None:
            inline = on_local_stack(self)
            dropped = [
                name
                for name, given in (
                    ("raw message delivery", raw_message_delivery),
                    ("filter policy", filter_policy),
                    ("dead-letter queue", dead_letter_queue is not None),
                )
                if given
            ]
            if inline and dropped:
                Annotations.of(self).add_warning_v2(
                    "exactly-once:localSubscription",
                    f"{consumer.name}'s subscription in the local emulator has no "
                    f"{', '.join(dropped)}: the topic's own Subscription entries carry none",
                )
                raw_message_delivery, filter_policy, dead_letter_queue = False, None, None
        if not inline:
            subscription = self.topic.add_subscription(
                subscriptions.SqsSubscription(
                    queue,
                    raw_message_delivery=raw_message_delivery,
                    filter_policy=dict(filter_policy) if filter_policy else None,
                    dead_letter_queue=dead_letter_queue,
                )
            )
            self.subscriptions.append(subscription)
            return subscription
        if raw_message_delivery or filter_policy or dead_letter_queue is not None:
            raise ValueError(
                f"{self.name}: an inline subscription (for {consumer.name}) takes no raw "
                "delivery, filter policy or dead-letter queue: the topic's Subscription "
                "property has only an endpoint and a protocol"
            )
        # What SqsSubscription would add: SNS may send to this queue, from this topic only.
        queue.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["sqs:SendMessage"],
                principals=[iam.ServicePrincipal(SNS_PRINCIPAL)],
                resources=[queue.queue_arn],
                conditions={"ArnEquals": {"aws:SourceArn": self.topic.topic_arn}},
            )
        )
        self._inline.append(
            sns.CfnTopic.SubscriptionProperty(endpoint=queue.queue_arn, protocol="sqs")
        )
        cast(sns.CfnTopic, self.topic.node.default_child).subscription = list(self._inline)
        return None

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        topic = self.topic
        return [
            cloudwatch.GraphWidget(
                title=f"{self.name} topic",
                left=[
                    topic.metric_number_of_messages_published(statistic="Sum"),
                    topic.metric_number_of_notifications_delivered(statistic="Sum"),
                    topic.metric_number_of_notifications_failed(statistic="Sum"),
                    topic.metric_number_of_notifications_filtered_out(statistic="Sum"),
                ],
                width=12,
            )
        ]
