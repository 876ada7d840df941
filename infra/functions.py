"""Lambda functions built one way: Python 3.14 on arm64, JSON logs, own log group and role.

The role starts empty (no AWSLambdaBasicExecutionRole, whose log permissions cover every log
group in the account); callers add exactly the statements their function needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.settings import Settings

RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
ASSET_EXCLUDES = ["__pycache__", "*.pyc", "tests"]
ROOT_FUNCTIONS = Path(__file__).resolve().parent.parent / "functions"


def retention(days: int) -> logs.RetentionDays:
    """`RetentionDays` members are named, not numbered; find the one CloudWatch means by `days`."""
    names = {
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
    return logs.RetentionDays[names[days]]


@dataclass(frozen=True)
class BuiltFunction:
    function: lambda_.Function
    role: iam.Role
    log_group: logs.LogGroup


def python_function(
    scope: Construct,
    construct_id: str,
    *,
    source: Path,
    handler: str,
    description: str,
    layer: lambda_.ILayerVersion,
    environment: dict[str, str],
    timeout_seconds: int,
    memory_mb: int,
    settings: Settings,
) -> BuiltFunction:
    log_group = logs.LogGroup(
        scope,
        f"{construct_id}Logs",
        retention=retention(settings.log_retention_days),
        removal_policy=RemovalPolicy.RETAIN if settings.is_prod else RemovalPolicy.DESTROY,
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
    function = lambda_.Function(
        scope,
        construct_id,
        runtime=RUNTIME,
        architecture=ARCHITECTURE,
        code=lambda_.Code.from_asset(str(source), exclude=ASSET_EXCLUDES),
        handler=handler,
        description=description,
        layers=[layer],
        environment=environment,
        timeout=Duration.seconds(timeout_seconds),
        memory_size=memory_mb,
        role=role,
        log_group=log_group,
        logging_format=lambda_.LoggingFormat.JSON,
        application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
        system_log_level_v2=lambda_.SystemLogLevel.WARN,
        tracing=lambda_.Tracing.ACTIVE if settings.xray else lambda_.Tracing.DISABLED,
    )
    if settings.xray:
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Added by CDK for active tracing: xray:PutTraceSegments and "
                "xray:PutTelemetryRecords support no resource-level permissions.",
            )
        )
    return BuiltFunction(function=function, role=role, log_group=log_group)
