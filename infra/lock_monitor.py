"""The scheduled stuck-lock monitor: counts expired leases and FAILED records as metrics."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.alarms import ALARM_PERIOD
from infra.consumer import METRICS_NAMESPACE, SharedResources
from infra.functions import ROOT_FUNCTIONS, python_function
from infra.settings import Settings

SERVICE_NAME = "lock_monitor"  # Powertools adds it as the `service` dimension of every metric
STUCK_LOCKS = "StuckLocks"
FAILED_RECORDS = "FailedRecords"


def monitor_metric(name: str) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": SERVICE_NAME},
        statistic="Maximum",
        period=ALARM_PERIOD,
    )


class LockMonitor(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, shared: SharedResources, settings: Settings
    ) -> None:
        super().__init__(scope, construct_id)
        tables = shared.tables
        built = python_function(
            self,
            "Function",
            source=ROOT_FUNCTIONS / "lock_monitor",
            handler="handler.handle",
            description="Counts stuck idempotency locks and FAILED records as metrics",
            layer=shared.layer,
            environment={
                "IDEMPOTENCY_TABLE": tables.idempotency.table_name,
                "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            },
            timeout_seconds=60,
            memory_mb=256,
            settings=settings,
        )
        self.function = built.function
        built.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadPendingIndex",
                actions=["dynamodb:Query"],
                resources=[tables.pending_index_arn],
            )
        )
        self.rule = events.Rule(
            self,
            "Schedule",
            description="Runs the stuck-lock monitor",
            schedule=events.Schedule.rate(Duration.minutes(settings.lock_monitor_interval_minutes)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        alarms = shared.alarms
        alarms.alarm(
            self,
            "StuckLocksAlarm",
            metric=monitor_metric(STUCK_LOCKS),
            threshold=1,
            description="In-progress idempotency records whose lease expired (crashed holders)",
        )
        alarms.alarm(
            self,
            "ErrorsAlarm",
            metric=self.function.metric_errors(period=ALARM_PERIOD, statistic="Sum"),
            threshold=1,
            description="The stuck-lock monitor failed, so stuck locks go uncounted",
        )

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title="Stuck locks and failed records",
                left=[monitor_metric(STUCK_LOCKS), monitor_metric(FAILED_RECORDS)],
                width=12,
            )
        ]
