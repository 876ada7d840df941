"""`IdempotentHttpApi`: an HTTP API (API Gateway v2) in front of one idempotent Lambda function.

Secure defaults throughout: every route IAM-authorized (SigV4) unless another authorizer is
given, a `$default` stage with throttling and JSON access logs in a log group of its own, a role
with item-level table rights only, and alarms on 5xx answers, function errors and throttles.
Every default is a keyword; `api_props` and `stage_props` override or add any keyword of
`HttpApi` and `HttpStage`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import jsii
from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk.aws_apigatewayv2_authorizers import HttpIamAuthorizer
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from exactly_once_cdk import outputs as names
from exactly_once_cdk.alarms import ALARM_PERIOD, AlarmSpec, function_alarms
from exactly_once_cdk.consumer import LEASE_MARGIN, METRICS_NAMESPACE
from exactly_once_cdk.functions import FunctionOptions, store_function
from exactly_once_cdk.local_mode import on_local_stack
from exactly_once_cdk.record_store import RecordStore
from exactly_once_cdk.tables import LedgerTable
from exactly_once_cdk.unfinished_work import THRESHOLD as UNFINISHED_THRESHOLD
from exactly_once_cdk.unfinished_work import WINDOW as UNFINISHED_WINDOW
from exactly_once_cdk.unfinished_work import UnfinishedWork
from exactly_once_cdk.widgets import function_widget

# API Gateway ends an HTTP API's Lambda integration after 30 s (its maximum) and answers 503.
# The function must give up first, so that the record's lease ends with the request and the
# client's retry finds a settled record rather than a lock held by a request nobody awaits.
INTEGRATION_LIMIT = Duration.seconds(30)
TIMEOUT = Duration.seconds(29)
ROUTES: tuple[tuple[str, str], ...] = (("POST", "/payments"),)
DEFAULT_STAGE = "$default"

# The stage's access log line, one JSON object per request. Who called (the SigV4 principal
# with IAM authorization), what route, what came back, and why an integration failed. No
# request header is logged: HTTP APIs offer no header variables in access logs, so the
# Idempotency-Key (and any Authorization) stays out of them.
ACCESS_LOG_FIELDS: dict[str, str] = {
    "requestId": "$context.requestId",
    "requestTime": "$context.requestTime",
    "ip": "$context.identity.sourceIp",
    "callerAccount": "$context.identity.accountId",
    "caller": "$context.identity.caller",
    "principal": "$context.identity.userArn",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
    "errorMessage": "$context.error.message",
    "authorizerError": "$context.authorizer.error",
}
ACCESS_LOG_FORMAT = json.dumps(ACCESS_LOG_FIELDS, separators=(",", ":"))


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """`HttpStage.access_log_settings` is an interface (no struct), so a class implements it."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)
        self._format = apigw.AccessLogFormat.custom(ACCESS_LOG_FORMAT)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return self._format


def check_timeout(construct_id: str, timeout: Duration) -> None:
    seconds = timeout.to_seconds()
    if seconds >= INTEGRATION_LIMIT.to_seconds():
        raise ValueError(
            f"{construct_id}: timeout {seconds:g} s must be under API Gateway's "
            f"{INTEGRATION_LIMIT.to_seconds():g} s integration limit (29 s at most), so the "
            "function gives up before the API answers 503 and the retry finds the record settled"
        )


class IdempotentHttpApi(Construct):
    """An HTTP API whose routes all call one function; the table and layer are shared.

    `table` is the idempotency store: an `IdempotencyTable` (DynamoDB) or an
    `IdempotencyDatabase` (PostgreSQL, which puts the function in its VPC).

    `code` and `handler` are your function (a handler wrapped in `exactly_once.idempotent_api`).
    `idempotency_scope` is the first half of every record id (`API_SCOPE`); it defaults to the
    construct id in lower case. `authorizer` defaults to IAM (`HttpIamAuthorizer`): callers sign
    with SigV4 and need `execute-api:Invoke`, which `grant_invoke` gives.

    With `create_api=False` only the function, its grants, its alarms and the `<Id>FunctionName`
    output are made: for emulators without API Gateway v2 (moto's CloudFormation), where a
    local gateway invokes the function instead. Left unset, `create_api` follows the app's
    `localStack` context (`exactly_once_cdk.local_mode`). With `outputs`, the stack gets `<Id>Url`,
    `<Id>ApiId` and `<Id>FunctionName`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        handler: str = "handler.handle",
        routes: Sequence[tuple[str, str]] = ROUTES,
        idempotency_scope: str | None = None,
        description: str | None = None,
        ledger: LedgerTable | None = None,
        block_expired_leases: bool = False,
        environment: Mapping[str, str] | None = None,
        timeout: Duration = TIMEOUT,
        memory_size: int = 256,
        lease_margin: Duration = LEASE_MARGIN,
        throttling_rate_limit: float = 50,
        throttling_burst_limit: int = 100,
        authorizer: apigwv2.IHttpRouteAuthorizer | None = None,
        access_log_retention: logs.RetentionDays | None = None,
        alarm_topic: sns.ITopic | None = None,
        unfinished_window: Duration = UNFINISHED_WINDOW,
        unfinished_threshold: float = UNFINISHED_THRESHOLD,
        function_options: FunctionOptions | None = None,
        create_api: bool | None = None,
        outputs: bool = True,
        metrics_namespace: str = METRICS_NAMESPACE,
        api_props: Mapping[str, Any] | None = None,
        stage_props: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        check_timeout(construct_id, timeout)
        if not routes:
            raise ValueError(f"{construct_id}: an API needs at least one (method, path) route")
        self.name = construct_id
        self.idempotency_scope = idempotency_scope or construct_id.lower()
        self.unfinished_work = UnfinishedWork(
            metrics_namespace, self.idempotency_scope, unfinished_window, unfinished_threshold
        )
        self.route_specs = tuple((method.upper(), path) for method, path in routes)
        options = function_options or FunctionOptions()
        if create_api is None:  # no API Gateway in the emulator: the local gateway serves
            create_api = not on_local_stack(self)
        stack = Stack.of(self)
        built = store_function(
            self,
            code=code,
            handler=handler,
            description=description or f"Idempotent HTTP API {construct_id}",
            layer=layer,
            table=table,
            ledger=ledger,
            scope_variable="API_SCOPE",
            idempotency_scope=self.idempotency_scope,
            metrics_namespace=metrics_namespace,
            lease_margin=lease_margin,
            block_expired_leases=block_expired_leases,
            environment=environment,
            timeout=timeout,
            memory_size=memory_size,
            options=options,
        )
        self.function = built.function
        self.role = built.role
        # Without API Gateway the template has no routes: the metadata lists them instead.
        metadata: dict[str, Any] = {"kind": names.KIND_API, "id": construct_id}
        if not create_api:
            metadata["routes"] = [f"{method} {path}" for method, path in self.route_specs]
        cast(lambda_.CfnFunction, self.function.node.default_child).add_metadata(
            names.ENTRY_POINT_METADATA, metadata
        )

        self.api: apigwv2.HttpApi | None = None
        self.stage: apigwv2.HttpStage | None = None
        self.access_logs: logs.LogGroup | None = None
        self.routes: list[apigwv2.HttpRoute] = []
        if create_api:
            self._api(
                authorizer=authorizer or HttpIamAuthorizer(),
                rate_limit=throttling_rate_limit,
                burst_limit=throttling_burst_limit,
                log_retention=access_log_retention or options.log_retention,
                options=options,
                api_props=api_props or {},
                stage_props=stage_props or {},
            )
        self.alarms = self._alarms(alarm_topic)
        if outputs:
            self._outputs(stack)

    def _api(
        self,
        *,
        authorizer: apigwv2.IHttpRouteAuthorizer,
        rate_limit: float,
        burst_limit: int,
        log_retention: logs.RetentionDays,
        options: FunctionOptions,
        api_props: Mapping[str, Any],
        stage_props: Mapping[str, Any],
    ) -> None:
        # No default stage: the one CDK makes has neither throttling nor access logs, and
        # HttpApi offers no keywords for them. The explicit `$default` stage below has both.
        api = apigwv2.HttpApi(
            self,
            "Api",
            **{
                # Named like the consumers' queues: unique per stack, readable in the console.
                "api_name": f"{Stack.of(self).stack_name}-{self.name}",
                "description": f"Idempotent HTTP API {self.name} (Idempotency-Key)",
                **api_props,
                "create_default_stage": False,
            },
        )
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=log_retention,
            removal_policy=options.log_removal_policy,
        )
        # HttpStage's L2 keywords cover everything used here (throttle -> DefaultRouteSettings,
        # access_log_settings -> AccessLogSettings), so no L1 escape hatch is needed.
        self.stage = apigwv2.HttpStage(
            self,
            "Stage",
            **{
                "stage_name": DEFAULT_STAGE,
                "auto_deploy": True,
                "throttle": apigwv2.ThrottleSettings(
                    rate_limit=rate_limit, burst_limit=burst_limit
                ),
                "access_log_settings": _AccessLogSettings(self.access_logs),
                **stage_props,
                "http_api": api,
            },
        )
        integration = HttpLambdaIntegration(
            "Integration",
            self.function,
            payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0,
        )
        for method, path in self.route_specs:
            self.routes += api.add_routes(
                path=path,
                methods=[apigwv2.HttpMethod(method)],
                integration=integration,
                authorizer=authorizer,
            )
        self.api = api

    @property
    def url(self) -> str | None:
        """The stage's invoke URL (ends in "/"), or None without an API."""
        return self.stage.url if self.stage is not None else None

    def grant_invoke(self, grantee: iam.IGrantable) -> None:
        """`execute-api:Invoke` on every route of this API (what IAM authorization asks for)."""
        for route in self.routes:
            route.grant_invoke(grantee)

    def _alarms(self, topic: sns.ITopic | None) -> list[cloudwatch.Alarm]:
        name = self.name
        specs: list[AlarmSpec] = []
        if self.api is not None:
            specs.append(
                AlarmSpec(
                    "ServerErrorsAlarm",
                    self.api.metric_server_error(period=ALARM_PERIOD, statistic="Sum"),
                    1,
                    f"{name}: the API answered 5xx (function failures, timeouts, throttles)",
                )
            )
        return function_alarms(self, name, self.function, topic, self.unfinished_work, own=specs)

    def _outputs(self, stack: Stack) -> None:
        values = {names.FUNCTION_NAME: self.function.function_name}
        if self.api is not None and self.url is not None:
            values[names.API_URL] = self.url
            values[names.API_ID] = self.api.api_id
        for suffix, value in values.items():
            CfnOutput(stack, f"{self.name}{suffix}", value=value)

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        name = self.name
        widgets: list[cloudwatch.IWidget] = []
        if self.api is not None:
            api = self.api
            widgets += [
                cloudwatch.GraphWidget(
                    title=f"{name} requests",
                    left=[
                        api.metric_count(statistic="Sum"),
                        api.metric_client_error(statistic="Sum"),
                        api.metric_server_error(statistic="Sum"),
                    ],
                    width=6,
                ),
                cloudwatch.GraphWidget(
                    title=f"{name} latency",
                    left=[
                        api.metric_latency(statistic="p99"),
                        api.metric_integration_latency(statistic="p99"),
                    ],
                    width=6,
                ),
            ]
        widgets.append(function_widget(name, self.function))
        widgets.append(self.unfinished_work.widget(f"{name} started minus finished"))
        return widgets
