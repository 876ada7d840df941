"""An encrypted SNS topic for alarms (optional), and the one way these constructs make an alarm.

Every alarm says how many periods it looks at and how many must breach (`Evaluation`):
- `ONE_EVENT` (1 of 1) where a single event is real: a message in a dead-letter queue, an event
  Lambda or SNS could not deliver, work that took a lock and recorded no outcome (a lost lock
  shows as +1 in exactly the one window it started in, so M of N with M > 1 never fires on it);
- `SUSTAINED` (2 of the last 3 five-minute periods) where one blip is noise: throttles (SQS and
  the SDK retry them), whole-invocation errors (the message is redelivered), queue age,
  5xx answers, transaction conflicts, overdue work.

Why not cdk-monitoring-constructs (the Powertools cookbook's choice), measured on 10.3.3: its
wheel is 1.5 MB (13 MB installed, next to aws-cdk-lib) and importing it adds about 0.2-0.4 s
to the 3.0-3.2 s the app already spends importing aws_cdk. Size and time are not the problem.
Its bundle has no metric for the event source mapping's EventCount metrics
(`EventSourceMappingUUID`) and none for DynamoDB's `TransactionConflict`, so those, the
started-minus-finished expression per scope and the lock monitor's heartbeat would stay custom
code beside it; and moving the rest would rename every alarm and dashboard widget the tests,
docs and existing stacks know, for alarms that are a few lines each here. Revisit if the
custom part shrinks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

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


class Evaluation(NamedTuple):
    """`datapoints` breaching periods out of the last `periods` put the alarm in ALARM."""

    periods: int
    datapoints: int


ONE_EVENT = Evaluation(1, 1)
SUSTAINED = Evaluation(3, 2)


class AlarmSpec(NamedTuple):
    """An alarm at `metric >= threshold`."""

    construct_id: str
    metric: cloudwatch.IMetric
    threshold: float
    description: str
    evaluation: Evaluation = SUSTAINED


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
    evaluation_periods: int = 1,
    datapoints_to_alarm: int = 1,
    treat_missing_data: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
) -> cloudwatch.Alarm:
    """An alarm at `metric >= threshold` in `datapoints_to_alarm` of the last
    `evaluation_periods` periods; with a topic, it notifies on alarm and on OK. Without one the
    alarm still exists, for the console or for actions added later. The 1-of-1 default is the
    behaviour before `Evaluation` existed; this package's alarms each pass their own."""
    if not 1 <= datapoints_to_alarm <= evaluation_periods:
        raise ValueError(
            f"{construct_id}: datapoints_to_alarm {datapoints_to_alarm} must be 1.."
            f"evaluation_periods ({evaluation_periods})"
        )
    alarm = cloudwatch.Alarm(
        scope,
        construct_id,
        metric=metric,
        threshold=threshold,
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=datapoints_to_alarm,
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
            scope,
            spec.construct_id,
            metric=spec.metric,
            threshold=spec.threshold,
            description=spec.description,
            topic=topic,
            evaluation_periods=spec.evaluation.periods,
            datapoints_to_alarm=spec.evaluation.datapoints,
        )
        for spec in specs
    ]


def dead_letter_alarm_specs(name: str, dlq: sqs.IQueue, age: Duration) -> list[AlarmSpec]:
    """What every dead-letter queue gets: a message waiting in it at all, and one waiting
    longer than `age`."""
    return [
        AlarmSpec(
            "DeadLetterQueueNotEmptyAlarm",
            dlq.metric_approximate_number_of_messages_visible(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            1,
            f"{name}: messages are waiting in the dead-letter queue",
            ONE_EVENT,
        ),
        AlarmSpec(
            "DeadLetterQueueAgeAlarm",
            dlq.metric_approximate_age_of_oldest_message(period=ALARM_PERIOD, statistic="Maximum"),
            age.to_seconds(),
            f"{name}: a dead-lettered message has waited too long (14-day retention)",
            ONE_EVENT,
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
        AlarmSpec(
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
        AlarmSpec(
            "UnfinishedWorkAlarm",
            unfinished.metric(),
            unfinished.threshold,
            unfinished.description(name),
            ONE_EVENT,  # a lost lock counts in one window only (module docstring)
        )
    )
    return add_alarms(scope, specs, topic)
