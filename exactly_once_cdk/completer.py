"""`AbandonedWorkCompleter` (opt-in): the completer on a schedule, for resumable keys nobody will
deliver again (docs/steps-completer.md).

A function of your code (the modules that define the `@resumable` functions) on the
`ExactlyOnceLayer`, whose handler is the layer's `exactly_once.steps.scheduled.handle`, run by
an EventBridge rule every `interval`. It reads the pending records (the store's pending index,
never a Scan) and takes keys through the ordinary fenced acquire, so it needs what an entry
point needs on the store plus the monitor's pending query. Whatever the resumables' steps write
(a payments table, a queue) is yours to grant on `completer.function`.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from exactly_once_cdk.alarms import add_alarm
from exactly_once_cdk.functions import FunctionOptions, python_function
from exactly_once_cdk.record_store import RecordStore

HANDLER = "exactly_once.steps.scheduled.handle"
INTERVAL = Duration.minutes(5)
TIMEOUT = Duration.minutes(5)


class AbandonedWorkCompleter(Construct):
    """Runs `complete_abandoned` for `resumables` (each `MODULE:NAME` or `MODULE`, importable
    from `code`) every `interval`, at most `limit` keys a run; `max_attempts` leaves alone a
    key tried that many times. Alarms when the completer function itself fails."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        resumables: Sequence[str],
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        interval: Duration = INTERVAL,
        timeout: Duration = TIMEOUT,
        limit: int = 100,
        max_attempts: int | None = None,
        alarm_topic: sns.ITopic | None = None,
        function_options: FunctionOptions | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        if not resumables or any(not spec or "," in spec for spec in resumables):
            raise ValueError(
                f"resumables: one or more MODULE or MODULE:NAME without commas, got {resumables!r}"
            )
        if limit < 1 or (max_attempts is not None and max_attempts < 1):
            raise ValueError("limit and max_attempts are at least 1")
        if timeout.to_seconds() > interval.to_seconds():
            raise ValueError(
                "the completer's timeout is longer than its interval: two runs would overlap "
                "(harmless, the acquire arbitrates, but wasted)"
            )
        environment = {
            **table.function_environment,
            "RESUMABLE_MODULES": ",".join(resumables),
            "COMPLETER_LIMIT": str(limit),
            "POWERTOOLS_SERVICE_NAME": "completer",
        }
        if max_attempts is not None:
            environment["COMPLETER_MAX_ATTEMPTS"] = str(max_attempts)
        built = python_function(
            self,
            "Function",
            code=code,
            handler=HANDLER,
            description="Finishes resumable keys nobody will deliver again (exactly_once)",
            layers=[layer],
            environment=environment,
            timeout=timeout,
            memory_size=256,
            options=function_options or FunctionOptions(),
            network=table.function_network,
        )
        self.function = built.function
        self.role = built.role
        table.grant_records(built.role)
        table.grant_pending_query(built.role)
        table.wait_for_schema(self.function)
        self.rule = events.Rule(
            self,
            "Schedule",
            description="Runs the completer of abandoned resumable keys",
            schedule=events.Schedule.rate(interval),
            # A run that failed is not retried: the next one, one interval later, is the retry.
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        self.alarms = [
            add_alarm(
                self,
                "ErrorsAlarm",
                metric=self.function.metric_errors(period=interval, statistic="Sum"),
                threshold=1,
                description="The completer of abandoned keys failed: its keys stay unfinished",
                topic=alarm_topic,
            )
        ]
