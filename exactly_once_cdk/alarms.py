"""An encrypted SNS topic for alarms (optional), and the one way these constructs make an alarm."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from exactly_once_cdk.unfinished_work import UnfinishedWork

ALARM_PERIOD = Duration.minutes(5)

AlarmSpec = tuple[str, cloudwatch.IMetric, float, str]
"""An alarm at `metric >= threshold`: (construct id, metric, threshold, description)."""


class AlarmTopic(Construct):
    """SNS topic under a customer-managed key, SSL-only, optionally mailed.

    The key is customer-managed on purpose: CloudWatch cannot publish to a topic under the
    AWS-managed `aws/sns` key (its key policy cannot be changed to let CloudWatch use it).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        email: str | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            description="Encrypts the exactly-once alarm topic",
            enable_key_rotation=True,
            removal_policy=removal_policy,
            pending_window=Duration.days(7),
        )
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],  # in a key policy "*" means this key
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name="Exactly-once SQS alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        # enforce_ssl replaces the topic's default policy, so say again who may publish.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            )
        )
        if email:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))


def add_alarm(
    scope: Construct,
    construct_id: str,
    *,
    metric: cloudwatch.IMetric,
    threshold: float,
    description: str,
    topic: sns.ITopic | None,
    treat_missing_data: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
) -> cloudwatch.Alarm:
    """An alarm at `metric >= threshold` over one period; with a topic, it notifies on alarm and
    on OK. Without one the alarm still exists, for the console or for actions added later."""
    alarm = cloudwatch.Alarm(
        scope,
        construct_id,
        metric=metric,
        threshold=threshold,
        evaluation_periods=1,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=treat_missing_data,
        alarm_description=description,
    )
    if topic is not None:
        action = cw_actions.SnsAction(topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
    return alarm


def add_alarms(
    scope: Construct, specs: Iterable[AlarmSpec], topic: sns.ITopic | None
) -> list[cloudwatch.Alarm]:
    """`add_alarm` for each spec, in order."""
    return [
        add_alarm(
            scope, alarm_id, metric=metric, threshold=threshold, description=text, topic=topic
        )
        for alarm_id, metric, threshold, text in specs
    ]


def dead_letter_alarm_specs(name: str, dlq: sqs.IQueue, age: Duration) -> list[AlarmSpec]:
    """What every dead-letter queue gets: a message waiting in it at all, and one waiting
    longer than `age`."""
    return [
        (
            "DeadLetterQueueNotEmptyAlarm",
            dlq.metric_approximate_number_of_messages_visible(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            1,
            f"{name}: messages are waiting in the dead-letter queue",
        ),
        (
            "DeadLetterQueueAgeAlarm",
            dlq.metric_approximate_age_of_oldest_message(period=ALARM_PERIOD, statistic="Maximum"),
            age.to_seconds(),
            f"{name}: a dead-lettered message has waited too long (14-day retention)",
        ),
    ]


def function_alarms(
    scope: Construct,
    name: str,
    function: lambda_.IFunction,
    topic: sns.ITopic | None,
    unfinished: UnfinishedWork,
    own: Iterable[AlarmSpec] = (),
) -> list[cloudwatch.Alarm]:
    """An entry point's `own` alarms, then what every entry point's function gets: whole
    invocations failed, throttling, and work started in its idempotency scope with no outcome
    recorded over the window."""
    specs: list[AlarmSpec] = [*own]
    specs += [
        (
            alarm_id,
            metric(period=ALARM_PERIOD, statistic="Sum"),
            1,
            f"{name}: the function {what}",
        )
        for alarm_id, metric, what in (
            ("ErrorsAlarm", function.metric_errors, "failed whole invocations"),
            ("ThrottlesAlarm", function.metric_throttles, "was throttled"),
        )
    ]
    specs.append(
        (
            "UnfinishedWorkAlarm",
            unfinished.metric(),
            unfinished.threshold,
            unfinished.description(name),
        )
    )
    return add_alarms(scope, specs, topic)
