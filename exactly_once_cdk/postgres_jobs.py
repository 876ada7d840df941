"""The PostgreSQL store's two jobs: the schema migration on deploy, and the hourly cleanup.

Both run code from the shared layer (`exactly_once.stores.postgres.*`), in the store's VPC, and
connect like every other function: through RDS Proxy, as the store's user, with an IAM token.

The migration could instead log in with the master password from Secrets Manager. It does not:
the proxy already maps IAM logins to that same database user (the one secret it holds), so the
password would add no privilege, only a Secrets Manager interface endpoint (an hourly charge in
every AZ) and a secret read by a function. Through the proxy, a deploy also proves that the path
every function takes works before any of them is updated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from aws_cdk import Acknowledgment, CfnElement, CustomResource, Duration, Stack, Validations
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import custom_resources as cr
from constructs import Construct

from exactly_once_cdk.alarms import ALARM_PERIOD, add_alarm
from exactly_once_cdk.functions import BuiltFunction, FunctionOptions, python_function

if TYPE_CHECKING:
    from exactly_once_cdk.record_store import RecordStore

MIGRATE_HANDLER = "exactly_once.stores.postgres.migrate_handler.handler"
CLEANUP_HANDLER = "exactly_once.stores.postgres.cleanup.handler"
SCHEMA_RESOURCE_TYPE = "Custom::ExactlyOnceSchema"
# The code is all in the layer (Lambda imports the handler's module from /opt/python); the
# function still needs a package of its own, so it gets this one line.
LAYER_ONLY_SOURCE = (
    '"""Nothing here: the handler is exactly_once.stores.postgres in the ExactlyOnceLayer."""\n'
)
# A new proxy can take minutes to report its target available; the provider framework waits
# 15 minutes for the handler at most.
MIGRATION_TIMEOUT = Duration.minutes(10)
MIGRATION_CONNECT_TIMEOUT_S = 30
CLEANUP_TIMEOUT = Duration.minutes(5)


def _layer_function(
    scope: Construct,
    construct_id: str,
    *,
    store: RecordStore,
    layer: lambda_.ILayerVersion,
    handler: str,
    description: str,
    timeout: Duration,
    options: FunctionOptions,
    extra_environment: dict[str, str] | None = None,
) -> BuiltFunction:
    built = python_function(
        scope,
        construct_id,
        code=lambda_.Code.from_inline(LAYER_ONLY_SOURCE),
        handler=handler,
        description=description,
        layers=[layer],
        environment={**store.function_environment, **(extra_environment or {})},
        timeout=timeout,
        memory_size=256,
        options=options,
        network=store.function_network,
    )
    store.grant_records(built.role)
    return built


class SchemaMigration(Construct):
    """A custom resource whose Create and Update apply the shipped migrations
    (`exactly_once.stores.postgres.migrate_handler`); Delete does nothing, the data outlives
    the stack.

    It is updated whenever the layer is, since the layer carries the migrations: a deploy with
    a new library version migrates before any function that `wait_for_schema` is updated.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        store: RecordStore,
        layer: lambda_.ILayerVersion,
        options: FunctionOptions,
    ) -> None:
        super().__init__(scope, construct_id)
        built = _layer_function(
            self,
            "Function",
            store=store,
            layer=layer,
            handler=MIGRATE_HANDLER,
            description="Applies the exactly-once PostgreSQL schema migrations (deploy time)",
            timeout=MIGRATION_TIMEOUT,
            options=options,
            extra_environment={"IDEMPOTENCY_PG_CONNECT_TIMEOUT": str(MIGRATION_CONNECT_TIMEOUT_S)},
        )
        self.function = built.function
        # The provider framework's function (CDK's, Node.js) gets what ours get: its own log
        # group and a role of its own, not AWSLambdaBasicExecutionRole.
        framework_logs = logs.LogGroup(
            self,
            "ProviderLogs",
            retention=options.log_retention,
            removal_policy=options.log_removal_policy,
        )
        framework_role = iam.Role(
            self,
            "ProviderRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Runs the schema migration's provider framework: invokes the migration",
        )
        framework_role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[framework_logs.log_group_arn],
            )
        )
        self.provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=self.function,
            framework_on_event_role=framework_role,
            log_group=framework_logs,
        )
        function_id = Stack.of(self).get_logical_id(
            cast(CfnElement, self.function.node.default_child)
        )
        Validations.of(framework_role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{function_id}.Arn>:*]",
                reason="Added by CDK's provider framework: lambda:InvokeFunction on the "
                "migration function and its versions (`:*`); the function has no versions or "
                "aliases, so this is that one function.",
            )
        )
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.provider.service_token,
            resource_type=SCHEMA_RESOURCE_TYPE,
            properties={"LayerVersionArn": layer.layer_version_arn},
        )


class ExpiredRecordCleanup(Construct):
    """Deletes expired records on a schedule (`exactly_once.stores.postgres.cleanup`):
    PostgreSQL has no TTL, so without it the records table only grows. Reads already treat an
    expired record as absent; this reclaims the space. Its failures alarm (an errors alarm on
    the function)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        store: RecordStore,
        layer: lambda_.ILayerVersion,
        interval: Duration,
        alarm_topic: sns.ITopic | None,
        options: FunctionOptions,
    ) -> None:
        super().__init__(scope, construct_id)
        built = _layer_function(
            self,
            "Function",
            store=store,
            layer=layer,
            handler=CLEANUP_HANDLER,
            description="Deletes expired exactly-once records from PostgreSQL (scheduled)",
            timeout=CLEANUP_TIMEOUT,
            options=options,
        )
        self.function = built.function
        store.wait_for_schema(self.function)
        self.rule = events.Rule(
            self,
            "Schedule",
            description="Runs the expired-record cleanup",
            schedule=events.Schedule.rate(interval),
            # The next run picks up whatever a failed one left.
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )
        self.alarm = add_alarm(
            self,
            "ErrorsAlarm",
            metric=self.function.metric_errors(period=ALARM_PERIOD, statistic="Sum"),
            threshold=1,
            description="The expired-record cleanup failed: expired records pile up in "
            "PostgreSQL until it succeeds",
            topic=alarm_topic,
        )
