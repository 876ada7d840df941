"""Lambda functions built one way: one `RuntimeTarget` (default Python 3.13 on arm64), JSON
logs, own log group and role.

The role starts empty (no AWSLambdaBasicExecutionRole, whose log permissions cover every log
group in the account); callers add exactly the statements their function needs. A function put
in a VPC (the PostgreSQL store's) also gets the network-interface actions Lambda attaches it with.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from exactly_once_cdk.runtime_target import DEFAULT_TARGET, PYTHON_VERSIONS, RuntimeTarget

if TYPE_CHECKING:
    from exactly_once_cdk.record_store import RecordStore
    from exactly_once_cdk.tables import LedgerTable

ASSET_EXCLUDES = ["__pycache__", "*.pyc", "tests"]
# Set by the construct and relied on (grants, log group, visibility rule): not overridable.
MANAGED_PROPS = frozenset({"role", "log_group", "timeout", "code", "handler"})
# What Lambda does with the function's role to attach it to a VPC: the EC2 half of
# AWSLambdaVPCAccessExecutionRole, which CDK adds only to roles it creates itself.
VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)

_RETENTION_NAMES = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
    1096: "THREE_YEARS",
    1827: "FIVE_YEARS",
}


def lambda_runtime(target: RuntimeTarget) -> lambda_.Runtime:
    """CDK's `Runtime` for the target, e.g. `Runtime.PYTHON_3_13`."""
    runtime: lambda_.Runtime = getattr(
        lambda_.Runtime, "PYTHON_" + target.python_version.replace(".", "_")
    )
    return runtime


def lambda_architecture(target: RuntimeTarget) -> lambda_.Architecture:
    return (
        lambda_.Architecture.ARM_64
        if target.architecture == "arm64"
        else (lambda_.Architecture.X86_64)
    )


def retention(days: int) -> logs.RetentionDays:
    """`RetentionDays` members are named, not numbered; find the one CloudWatch means by `days`."""
    return logs.RetentionDays[_RETENTION_NAMES[days]]


@dataclass(frozen=True)
class FunctionOptions:
    """What every function of these constructs shares; each field is a secure default.

    `target` is the Python version and architecture; give the layer the same one
    (`ExactlyOnceLayer(target=...)`), its wheels and bytecode are built for it alone.
    `function_props` is the escape hatch: any `lambda_.Function` keyword, applied last.
    """

    target: RuntimeTarget = DEFAULT_TARGET
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    log_removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    tracing: bool = False
    function_props: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class BuiltFunction:
    function: lambda_.Function
    role: iam.Role
    log_group: logs.LogGroup


def python_function(
    scope: Construct,
    construct_id: str,
    *,
    code: lambda_.Code,
    handler: str,
    description: str,
    layers: list[lambda_.ILayerVersion],
    environment: Mapping[str, str],
    timeout: Duration,
    memory_size: int,
    options: FunctionOptions,
    network: Mapping[str, Any] | None = None,
) -> BuiltFunction:
    """`network`: the `vpc`, `vpc_subnets` and `security_groups` keywords of a function that
    must reach something inside a VPC (`RecordStore.function_network`)."""
    log_group = logs.LogGroup(
        scope,
        f"{construct_id}Logs",
        retention=options.log_retention,
        removal_policy=options.log_removal_policy,
    )
    role = iam.Role(
        scope,
        f"{construct_id}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=f"Runs {construct_id}: only its own log group and the resources it uses",
    )
    role.add_to_policy(
        iam.PolicyStatement(
            sid="WriteOwnLogs",
            actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            # The log group's Arn attribute already ends in ":*" (all of its streams).
            resources=[log_group.log_group_arn],
        )
    )
    overrides = dict(options.function_props or {})
    managed = sorted(set(overrides) & MANAGED_PROPS)
    if managed:
        raise ValueError(
            f"function_props cannot set {managed}: the construct grants, logs and times out "
            "through them (use the construct's own keywords, or `environment` to add variables)"
        )
    for layer in layers:
        # An ExactlyOnceLayer knows its target; a layer for another Python or CPU would fail
        # at the first import on Lambda, so refuse it at synth.
        layer_target = getattr(layer, "target", None)
        if isinstance(layer_target, RuntimeTarget) and layer_target != options.target:
            raise ValueError(
                f"{construct_id}: the layer is built for {layer_target.runtime_name} "
                f"{layer_target.architecture}, the function runs {options.target.runtime_name} "
                f"{options.target.architecture}: give both the same RuntimeTarget"
            )
    environment = {**environment, **overrides.pop("environment", {})}
    props: dict[str, Any] = {
        "runtime": lambda_runtime(options.target),
        "architecture": lambda_architecture(options.target),
        "code": code,
        "handler": handler,
        "description": description,
        "layers": layers,
        "environment": dict(environment),
        "timeout": timeout,
        "memory_size": memory_size,
        "role": role,
        "log_group": log_group,
        "logging_format": lambda_.LoggingFormat.JSON,
        "application_log_level_v2": lambda_.ApplicationLogLevel.INFO,
        "system_log_level_v2": lambda_.SystemLogLevel.WARN,
        "tracing": lambda_.Tracing.ACTIVE if options.tracing else lambda_.Tracing.DISABLED,
        **(network or {}),
        **overrides,
    }
    if props.get("vpc") is not None:
        _allow_vpc_attachment(role)
    function = lambda_.Function(scope, construct_id, **props)
    if options.target.python_version != PYTHON_VERSIONS[-1]:
        Validations.of(function).acknowledge(
            Acknowledgment(
                id="AwsSolutions-L1",
                reason=f"{options.target.runtime_name} is chosen (RuntimeTarget): the layer's "
                ".pyc files must be compiled by the target's own interpreter, so the runtime is "
                "one the build machine has; every version offered is a supported Lambda runtime.",
            )
        )
    if props["tracing"] == lambda_.Tracing.ACTIVE:
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Added by CDK for active tracing: xray:PutTraceSegments and "
                "xray:PutTelemetryRecords support no resource-level permissions.",
            )
        )
    return BuiltFunction(function=function, role=role, log_group=log_group)


def _allow_vpc_attachment(role: iam.Role) -> None:
    """Added before the function, so the function depends on it: Lambda checks these actions
    when it creates the function and manages the function's network interfaces with them."""
    role.add_to_policy(
        iam.PolicyStatement(sid="AttachToVpc", actions=list(VPC_ACTIONS), resources=["*"])
    )
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="Lambda's VPC attachment (AttachToVpc): ec2:CreateNetworkInterface and the "
            "ec2:Describe* actions work only on Resource '*' (Lambda developer guide, "
            "AWSLambdaVPCAccessExecutionRole); the network interfaces do not exist before Lambda "
            "creates them, so there is no ARN to name.",
        )
    )


def store_environment(
    *,
    store_variables: Mapping[str, str],
    ledger_table_name: str | None,
    scope_variable: str,
    scope: str,
    metrics_namespace: str,
    lease_margin: Duration,
    block_expired_leases: bool,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The variables every entry point's function reads (exactly_once.config.store_settings):
    the store's own (`RecordStore.function_environment`), the ledger's, and its scope under its
    own name (CONSUMER_SCOPE, API_SCOPE); `extra` adds or overrides."""
    return {
        **store_variables,
        **({"LEDGER_TABLE": ledger_table_name} if ledger_table_name else {}),
        scope_variable: scope,
        "POWERTOOLS_SERVICE_NAME": scope,
        "POWERTOOLS_METRICS_NAMESPACE": metrics_namespace,
        "LEASE_MARGIN_MS": str(int(lease_margin.to_milliseconds())),
        "BLOCK_EXPIRED_LEASES": "true" if block_expired_leases else "false",
        **(extra or {}),
    }


def store_function(
    scope: Construct,
    *,
    code: lambda_.Code,
    handler: str,
    description: str,
    layer: lambda_.ILayerVersion,
    table: RecordStore,
    ledger: LedgerTable | None,
    scope_variable: str,
    idempotency_scope: str,
    metrics_namespace: str,
    lease_margin: Duration,
    block_expired_leases: bool,
    environment: Mapping[str, str] | None,
    timeout: Duration,
    memory_size: int,
    options: FunctionOptions,
) -> BuiltFunction:
    """An entry point's function ("Function": a consumer's, an HTTP API's, an SNS
    subscriber's): the store's variables (`store_environment`) with `environment` over them,
    its network (a VPC for PostgreSQL), and its role granted the records of `table` (a
    `RecordStore`: DynamoDB's table or PostgreSQL's database) and appends to `ledger`."""
    built = python_function(
        scope,
        "Function",
        code=code,
        handler=handler,
        description=description,
        layers=[layer],
        environment=store_environment(
            store_variables=table.function_environment,
            ledger_table_name=ledger.table_name if ledger else None,
            scope_variable=scope_variable,
            scope=idempotency_scope,
            metrics_namespace=metrics_namespace,
            lease_margin=lease_margin,
            block_expired_leases=block_expired_leases,
            extra=environment,
        ),
        timeout=timeout,
        memory_size=memory_size,
        options=options,
        network=table.function_network,
    )
    table.grant_records(built.role)
    table.wait_for_schema(built.function)
    if ledger is not None:
        ledger.grant_append(built.role)
    return built
