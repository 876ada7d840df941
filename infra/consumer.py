"""`IdempotentConsumer`: a queue, its DLQ, the Lambda function, the event source mapping, alarms."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.alarms import ALARM_PERIOD, AlarmTopic
from infra.functions import python_function
from infra.settings import ConsumerConfig, Settings
from infra.tables import Tables

METRICS_NAMESPACE = "ExactlyOnce"
DLQ_RETENTION = Duration.days(14)


@dataclass(frozen=True)
class SharedResources:
    """What every consumer uses: one idempotency table, one ledger, one layer, one topic."""

    tables: Tables
    layer: lambda_.ILayerVersion
    alarms: AlarmTopic


class IdempotentConsumer(Construct):
    """Everything one consumer owns; the tables, layer and alarm topic come in `shared`.

    The function gets item-level rights on the shared tables, its own queue and DLQ only.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: ConsumerConfig,
        shared: SharedResources,
        settings: Settings,
    ) -> None:
        super().__init__(scope, construct_id)
        spec = config.spec
        self.config = config
        # Named queues: the DLQ's redrive allow policy must name its source queue's ARN, and a
        # reference to the queue would be a cycle (the queue's redrive policy names the DLQ).
        queue_name = spec.queue_name(settings.stack_name)
        source_arn = Stack.of(self).format_arn(
            service="sqs", resource=queue_name, arn_format=ArnFormat.NO_RESOURCE_NAME
        )

        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            queue_name=spec.dead_letter_queue_name(settings.stack_name),
            fifo=spec.fifo or None,
            content_based_deduplication=False if spec.fifo else None,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
            redrive_allow_policy=sqs.RedriveAllowPolicy(
                redrive_permission=sqs.RedrivePermission.BY_QUEUE,
                source_queues=[sqs.Queue.from_queue_arn(self, "SourceQueueRef", source_arn)],
            ),
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=queue_name,
            fifo=spec.fifo or None,
            content_based_deduplication=False if spec.fifo else None,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(config.visibility_timeout_seconds),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=config.max_receive_count
            ),
        )
        tables = shared.tables
        built = python_function(
            self,
            "Function",
            source=spec.source_path,
            handler=spec.handler,
            description=spec.description or f"Idempotent consumer {spec.id}",
            layer=shared.layer,
            environment={
                "IDEMPOTENCY_TABLE": tables.idempotency.table_name,
                "LEDGER_TABLE": tables.ledger.table_name,
                "DEAD_LETTER_QUEUE_URL": self.dead_letter_queue.queue_url,
                "CONSUMER_SCOPE": spec.scope,
                "POWERTOOLS_SERVICE_NAME": spec.scope,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                "LEASE_MARGIN_MS": str(config.lease_margin_seconds * 1000),
                "BLOCK_EXPIRED_LEASES": "true" if spec.block_expired_leases else "false",
            },
            timeout_seconds=config.timeout_seconds,
            memory_mb=config.memory_mb,
            settings=settings,
        )
        self.function = built.function
        self._grant(built.role, tables)

        self.event_source_mapping = lambda_.EventSourceMapping(
            self,
            "EventSourceMapping",
            target=self.function,
            event_source_arn=self.queue.queue_arn,
            batch_size=config.batch_size,
            max_batching_window=(
                None if spec.fifo else Duration.seconds(config.batching_window_seconds)
            ),
            max_concurrency=config.max_concurrency,
            report_batch_item_failures=True,
            metrics_config=lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
            # Deployed into moto the mapping must stay off: moto runs it synchronously on send
            # and deletes failed messages; the local poller does the polling instead.
            enabled=not settings.local_stack,
        )
        # The service reads the queue with the function's role: the mapping needs the role's
        # permissions to exist first.
        self.event_source_mapping.node.add_dependency(built.role)

        self._alarms(shared.alarms, settings)

    def _grant(self, role: iam.Role, tables: Tables) -> None:
        """Item-level actions only, written out: `grant*` helpers add batch and scan actions."""
        role.add_to_policy(
            iam.PolicyStatement(
                sid="IdempotencyRecords",
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                ],
                resources=[tables.idempotency.table_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="LedgerAppend",
                actions=["dynamodb:PutItem"],
                resources=[tables.ledger.table_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ConsumeSourceQueue",
                actions=[
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                    "sqs:ChangeMessageVisibility",
                ],
                resources=[self.queue.queue_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="SendPermanentFailuresToDeadLetterQueue",
                actions=["sqs:SendMessage"],
                resources=[self.dead_letter_queue.queue_arn],
            )
        )

    def _alarms(self, alarms: AlarmTopic, settings: Settings) -> None:
        name = self.config.spec.id
        alarms.alarm(
            self,
            "DeadLetterQueueNotEmptyAlarm",
            metric=self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            threshold=1,
            description=f"{name}: messages are waiting in the dead-letter queue",
        )
        alarms.alarm(
            self,
            "DeadLetterQueueAgeAlarm",
            metric=self.dead_letter_queue.metric_approximate_age_of_oldest_message(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            threshold=settings.dlq_age_alarm_seconds,
            description=f"{name}: a dead-lettered message has waited too long (14-day retention)",
        )
        alarms.alarm(
            self,
            "QueueAgeAlarm",
            metric=self.queue.metric_approximate_age_of_oldest_message(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            threshold=settings.queue_age_alarm_seconds,
            description=f"{name}: the queue is falling behind",
        )
        alarms.alarm(
            self,
            "ErrorsAlarm",
            metric=self.function.metric_errors(period=ALARM_PERIOD, statistic="Sum"),
            threshold=1,
            description=f"{name}: the function failed whole invocations",
        )
        alarms.alarm(
            self,
            "ThrottlesAlarm",
            metric=self.function.metric_throttles(period=ALARM_PERIOD, statistic="Sum"),
            threshold=1,
            description=f"{name}: the function was throttled",
        )

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        name = self.config.spec.id
        return [
            cloudwatch.GraphWidget(
                title=f"{name} queue",
                left=[
                    self.queue.metric_approximate_number_of_messages_visible(statistic="Maximum"),
                    self.queue.metric_number_of_messages_deleted(statistic="Sum"),
                ],
                right=[self.queue.metric_approximate_age_of_oldest_message(statistic="Maximum")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"{name} dead-letter queue",
                left=[
                    self.dead_letter_queue.metric_approximate_number_of_messages_visible(
                        statistic="Maximum"
                    )
                ],
                right=[
                    self.dead_letter_queue.metric_approximate_age_of_oldest_message(
                        statistic="Maximum"
                    )
                ],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"{name} function",
                left=[
                    self.function.metric_invocations(statistic="Sum"),
                    self.function.metric_errors(statistic="Sum"),
                    self.function.metric_throttles(statistic="Sum"),
                ],
                right=[self.function.metric_duration(statistic="p99")],
                width=8,
            ),
        ]
