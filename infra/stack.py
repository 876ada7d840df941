"""The stack: shared tables, layer and alarm topic; one `IdempotentConsumer` per registry entry."""

from __future__ import annotations

from typing import Any

from aws_cdk import (
    CfnOutput,
    CliCredentialsStackSynthesizer,
    IStackSynthesizer,
    RemovalPolicy,
    Stack,
)
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.alarms import ALARM_PERIOD, AlarmTopic
from infra.consumer import IdempotentConsumer, SharedResources
from infra.consumers import CONSUMERS, ConsumerSpec
from infra.functions import ARCHITECTURE, RUNTIME
from infra.layer_build import build_layer
from infra.lock_monitor import LockMonitor
from infra.settings import Settings, resolve
from infra.tables import Tables


def local_synthesizer() -> IStackSynthesizer:
    """For moto: no bootstrap stack, no deploy roles, no bootstrap-version rule.

    Assets go to the default bootstrap bucket name, which `tools/local_deploy.py` creates.
    """
    return CliCredentialsStackSynthesizer()


class ExactlyOnceStack(Stack):
    def __init__(
        self,
        scope: Construct,
        *,
        settings: Settings,
        consumers: tuple[ConsumerSpec, ...] = CONSUMERS,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            scope,
            settings.stack_name,
            stack_name=settings.stack_name,
            description="Exactly-once SQS consumers on Lambda: queues, DLQs, idempotency table",
            synthesizer=local_synthesizer() if settings.local_stack else None,
            **kwargs,
        )
        self.settings = settings
        removal = RemovalPolicy.RETAIN if settings.is_prod else RemovalPolicy.DESTROY

        self.tables = Tables(self, "Tables", prod=settings.is_prod)
        self.layer = lambda_.LayerVersion(
            self,
            "SharedLayer",
            code=lambda_.Code.from_asset(str(build_layer())),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="exactly_once package and pinned Powertools",
            removal_policy=removal,
        )
        self.alarm_topic = AlarmTopic(self, "Alarms", email=settings.alarm_email, removal=removal)
        shared = SharedResources(tables=self.tables, layer=self.layer, alarms=self.alarm_topic)

        self.consumers = [
            IdempotentConsumer(
                self, spec.id, config=resolve(spec, settings), shared=shared, settings=settings
            )
            for spec in consumers
        ]
        self.lock_monitor = LockMonitor(self, "LockMonitor", shared=shared, settings=settings)
        self._table_alarms()
        self._dashboard()
        self._outputs()

    def _table_alarms(self) -> None:
        for label, table in (
            ("Idempotency", self.tables.idempotency),
            ("Ledger", self.tables.ledger),
        ):
            throttles = cloudwatch.MathExpression(
                expression="FILL(reads, 0) + FILL(writes, 0)",
                using_metrics={
                    "reads": table.metric("ReadThrottleEvents", statistic="Sum"),
                    "writes": table.metric("WriteThrottleEvents", statistic="Sum"),
                },
                label=f"{label} throttle events",
                period=ALARM_PERIOD,
            )
            self.alarm_topic.alarm(
                self.tables,
                f"{label}ThrottlesAlarm",
                metric=throttles,
                threshold=1,
                description=f"{label} table requests were throttled",
            )

    def _dashboard(self) -> None:
        dashboard = cloudwatch.Dashboard(self, "Dashboard")
        for consumer in self.consumers:
            dashboard.add_widgets(*consumer.dashboard_widgets())
        table_widgets: list[cloudwatch.IWidget] = [
            cloudwatch.GraphWidget(
                title="DynamoDB throttle events",
                left=[
                    table.metric(name, statistic="Sum", label=f"{label} {name}")
                    for label, table in (
                        ("Idempotency", self.tables.idempotency),
                        ("Ledger", self.tables.ledger),
                    )
                    for name in ("ReadThrottleEvents", "WriteThrottleEvents")
                ],
                width=12,
            )
        ]
        dashboard.add_widgets(*table_widgets, *self.lock_monitor.dashboard_widgets())
        self.dashboard = dashboard

    def _outputs(self) -> None:
        for consumer in self.consumers:
            name = consumer.config.spec.id
            values = {
                "QueueUrl": consumer.queue.queue_url,
                "QueueArn": consumer.queue.queue_arn,
                "DeadLetterQueueUrl": consumer.dead_letter_queue.queue_url,
                "DeadLetterQueueArn": consumer.dead_letter_queue.queue_arn,
                "FunctionName": consumer.function.function_name,
            }
            for suffix, value in values.items():
                CfnOutput(self, f"{name}{suffix}", value=value)
        CfnOutput(self, "IdempotencyTableName", value=self.tables.idempotency.table_name)
        CfnOutput(self, "LedgerTableName", value=self.tables.ledger.table_name)
        CfnOutput(self, "LockMonitorFunctionName", value=self.lock_monitor.function.function_name)
        CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic.topic_arn)
