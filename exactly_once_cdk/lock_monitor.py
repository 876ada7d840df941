"""`StuckLockMonitor` (opt-in): a scheduled function that counts stuck locks and FAILED records.

Its code ships with these constructs (`monitor_function/`) and runs on the `ExactlyOnceLayer`;
it reads only the pending records (DynamoDB's sparse index, PostgreSQL's partial index), never
the whole store.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from exactly_once_cdk.alarms import ALARM_PERIOD, Evaluation, add_alarm
from exactly_once_cdk.consumer import METRICS_NAMESPACE
from exactly_once_cdk.functions import ASSET_EXCLUDES, FunctionOptions, python_function
from exactly_once_cdk.record_store import RecordStore

SERVICE_NAME = "lock_monitor"  # Powertools adds it as the `service` dimension of every metric
STUCK_LOCKS = "StuckLocks"
OVERDUE_WORK = "OverdueWork"
FAILED_RECORDS = "FailedRecords"
INTERVAL = Duration.minutes(5)
# Two periods, both breaching, each at least one interval long: one run that lands late (or a
# period that a run's jitter leaves empty) is not enough, two missed intervals are.
HEARTBEAT = Evaluation(2, 2)
MAX_WINDOW_SECONDS = 86_400  # CloudWatch: period x evaluation periods at most one day
MONITOR_CODE = Path(__file__).resolve().parent / "monitor_function"


def monitor_metric(
    name: str,
    namespace: str = METRICS_NAMESPACE,
    service: str = SERVICE_NAME,
    period: Duration = ALARM_PERIOD,
) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={"service": service},
        statistic="Maximum",
        period=period,
    )


def alarm_period(interval: Duration) -> Duration:
    """The monitor's alarm period: the 5-minute alarm period, or the interval if longer, so
    that every period can hold a run."""
    seconds = max(int(interval.to_seconds()), int(ALARM_PERIOD.to_seconds()))
    if seconds % 60 or seconds * HEARTBEAT.periods > MAX_WINDOW_SECONDS:
        raise ValueError(
            f"stuck-lock monitor interval {interval.to_seconds():g} s: whole minutes, at most "
            f"{MAX_WINDOW_SECONDS // HEARTBEAT.periods // 60} min (its alarms look at "
            f"{HEARTBEAT.periods} intervals, and CloudWatch at one day at most)"
        )
    return Duration.seconds(seconds)


class StuckLockMonitor(Construct):
    """Runs every `interval`; alarms when a lease expired with nobody taking over, and when
    work runs past the completion its holder expected.

    Its metrics are `<metrics_namespace>/StuckLocks`, `OverdueWork` and `FailedRecords` with
    the dimension `service=<service_name>`: give each stack in one account and region its own
    service name, or their alarms count each other's records.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        interval: Duration = INTERVAL,
        alarm_topic: sns.ITopic | None = None,
        function_options: FunctionOptions | None = None,
        metrics_namespace: str = METRICS_NAMESPACE,
        service_name: str = SERVICE_NAME,
    ) -> None:
        super().__init__(scope, construct_id)
        self.metrics_namespace, self.service_name = metrics_namespace, service_name
        self.period = alarm_period(interval)
        built = python_function(
            self,
            "Function",
            code=lambda_.Code.from_asset(str(MONITOR_CODE), exclude=ASSET_EXCLUDES),
            handler="handler.handle",
            description="Counts stuck idempotency locks and FAILED records as metrics",
            layers=[layer],
            environment={
                **table.function_environment,
                "POWERTOOLS_SERVICE_NAME": service_name,
                "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace,
            },
            timeout=Duration.seconds(60),
            memory_size=256,
            options=function_options or FunctionOptions(),
            network=table.function_network,
        )
        self.function = built.function
        table.grant_pending_query(built.role)
        table.wait_for_schema(self.function)
        self.rule = events.Rule(
            self,
            "Schedule",
            description="Runs the stuck-lock monitor",
            schedule=events.Schedule.rate(interval),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        periods, datapoints = HEARTBEAT
        self.alarms = [
            add_alarm(
                self,
                "StuckLocksAlarm",
                metric=self.metric(STUCK_LOCKS),
                threshold=1,
                description="In-progress idempotency records whose lease expired (crashed "
                "holders), or no count at all: the monitor stopped running (heartbeat)",
                topic=alarm_topic,
                # The monitor emits StuckLocks on every run, 0 included: no datapoint means no
                # run, which must page like a stuck lock rather than read as "all clear".
                treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
                evaluation_periods=periods,
                datapoints_to_alarm=datapoints,
            ),
            add_alarm(
                self,
                "OverdueWorkAlarm",
                metric=self.metric(OVERDUE_WORK),
                threshold=1,
                description="In-progress work past the completion its holder expected "
                "(`once` with expected_duration_s): slow or stalled, its lease still live",
                topic=alarm_topic,
                evaluation_periods=periods,
                datapoints_to_alarm=datapoints,
            ),
            add_alarm(
                self,
                "ErrorsAlarm",
                metric=self.function.metric_errors(period=self.period, statistic="Sum"),
                threshold=1,
                description="The stuck-lock monitor failed, so stuck locks go uncounted",
                topic=alarm_topic,
                evaluation_periods=periods,
                datapoints_to_alarm=datapoints,
            ),
        ]

    def metric(self, name: str) -> cloudwatch.Metric:
        """`StuckLocks`, `OverdueWork` or `FailedRecords` as this monitor emits them."""
        return monitor_metric(name, self.metrics_namespace, self.service_name, self.period)

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title="Stuck locks, overdue work and failed records",
                left=[
                    self.metric(STUCK_LOCKS),
                    self.metric(OVERDUE_WORK),
                    self.metric(FAILED_RECORDS),
                ],
                width=12,
            )
        ]
