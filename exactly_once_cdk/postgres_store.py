"""`IdempotencyDatabase`: the idempotency records in Aurora PostgreSQL Serverless v2, behind RDS
Proxy, in a VPC of isolated subnets (postgres_network.py): the PostgreSQL `RecordStore`.

Why RDS Proxy in a VPC, not the RDS Data API: the library's driver is psycopg 3 speaking the
PostgreSQL wire protocol, and the store needs what only a real connection gives. The acquire is
one `INSERT ... ON CONFLICT ... RETURNING` statement, and `ctx.transaction` commits the
business writes and the COMPLETED record in one transaction on one connection. The Data API is
HTTP (one call per statement, transactions by id over separate requests): it would take a second
driver and a second implementation of the store. Lambda scales by concurrent executions, each
with its own pool; the proxy multiplexes all of them onto a bounded set of database connections,
so a burst of functions never exhausts the cluster's max_connections, and it keeps those
connections across the functions' cold starts.

Authentication is IAM end to end for the functions: RDS Proxy requires TLS and IAM auth, each
function's role may `rds-db:connect` as the one database user on this proxy, and the library
signs a 15-minute token per new connection (`IDEMPOTENCY_DB_IAM_AUTH=true`). The database's
password is generated into Secrets Manager and only the proxy reads it. Storage, backups and
that secret are encrypted with a customer-managed KMS key that rotates.

The schema is applied on deploy and expired records are deleted hourly (postgres_jobs.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_rds as rds
from aws_cdk import aws_sns as sns
from constructs import Construct

from exactly_once.stores.postgres.session import init_query
from exactly_once_cdk import outputs
from exactly_once_cdk.alarms import ALARM_PERIOD, add_alarm
from exactly_once_cdk.functions import FunctionOptions
from exactly_once_cdk.postgres_jobs import ExpiredRecordCleanup, SchemaMigration
from exactly_once_cdk.postgres_nag import acknowledge_database_rules
from exactly_once_cdk.postgres_network import (
    DEFAULT_INTERFACE_ENDPOINTS,
    PORT,
    StoreNetwork,
)

DATABASE_NAME = "exactly_once"
# The one database user: the proxy holds its secret, the functions connect as it with IAM.
DATABASE_USER = "exactly_once"
ENGINE_VERSION = rds.AuroraPostgresEngineVersion.VER_16_8
MIN_CAPACITY = 0.5  # ACUs; 0 would pause the database and make the next connect wait for it
MAX_CAPACITY = 4
BACKUP_RETENTION = Duration.days(7)
CLEANUP_INTERVAL = Duration.hours(1)
CAPACITY_ALARM_PERCENT = 90


def dsn(host: str, *, dbname: str = DATABASE_NAME, user: str = DATABASE_USER) -> str:
    """The libpq connection string the functions get: no password (an IAM token is made per
    connection), TLS required as the proxy requires it."""
    return f"host={host} port={PORT} dbname={dbname} user={user} sslmode=require"


class IdempotencyDatabase(Construct):
    """Aurora PostgreSQL Serverless v2 (one writer), RDS Proxy, the schema migration and the
    cleanup schedule, in a VPC of its own; pass it as `table=` to the entry-point constructs.

    `removal_policy` is the stage's: RETAIN (prod) turns on deletion protection, keeps the key,
    and deletes the cluster only through a final snapshot (RETAIN would leave it running inside
    a VPC the stack then cannot delete); DESTROY removes everything. `function_options` apply to
    the migration and cleanup functions; `alarm_topic` gets the capacity and cleanup alarms.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        layer: lambda_.ILayerVersion,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        engine_version: rds.AuroraPostgresEngineVersion = ENGINE_VERSION,
        min_capacity: float = MIN_CAPACITY,
        max_capacity: float = MAX_CAPACITY,
        backup_retention: Duration = BACKUP_RETENTION,
        interface_endpoints: Sequence[ec2.InterfaceVpcEndpointAwsService] = (
            DEFAULT_INTERFACE_ENDPOINTS
        ),
        gateway_endpoints: Sequence[ec2.GatewayVpcEndpointAwsService] = (),
        cleanup_interval: Duration = CLEANUP_INTERVAL,
        alarm_topic: sns.ITopic | None = None,
        function_options: FunctionOptions | None = None,
        output: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        options = function_options or FunctionOptions()
        keep = removal_policy == RemovalPolicy.RETAIN
        self.network = StoreNetwork(
            self,
            "Network",
            interface_endpoints=interface_endpoints,
            gateway_endpoints=gateway_endpoints,
            flow_log_retention=options.log_retention,
            removal_policy=options.log_removal_policy,
        )
        self.key = kms.Key(
            self,
            "Key",
            description="Encrypts the exactly-once PostgreSQL store: storage, backups, secret",
            enable_key_rotation=True,
            # A retained snapshot is readable only while its key exists.
            removal_policy=removal_policy,
            pending_window=Duration.days(7),
        )
        self.cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=rds.DatabaseClusterEngine.aurora_postgres(version=engine_version),
            writer=rds.ClusterInstance.serverless_v2("Writer", auto_minor_version_upgrade=True),
            serverless_v2_min_capacity=min_capacity,
            serverless_v2_max_capacity=max_capacity,
            default_database_name=DATABASE_NAME,
            credentials=rds.Credentials.from_generated_secret(
                DATABASE_USER, encryption_key=self.key
            ),
            storage_encrypted=True,
            storage_encryption_key=self.key,
            iam_authentication=True,
            vpc=self.network.vpc,
            vpc_subnets=self.network.subnets,
            security_groups=[self.network.database],
            backup=rds.BackupProps(retention=backup_retention),
            deletion_protection=keep,
            removal_policy=RemovalPolicy.SNAPSHOT if keep else removal_policy,
        )
        secret = self.cluster.secret
        if secret is None:  # from_generated_secret always makes one; this keeps mypy honest
            raise RuntimeError("the cluster has no generated secret")
        self.secret = secret
        self.proxy = rds.DatabaseProxy(
            self,
            "Proxy",
            proxy_target=rds.ProxyTarget.from_cluster(self.cluster),
            secrets=[secret],
            vpc=self.network.vpc,
            vpc_subnets=self.network.subnets,
            security_groups=[self.network.proxy],
            require_tls=True,
            iam_auth=True,
            # The store's timeouts, set on each database connection by the proxy: sent by the
            # client as startup options they would pin it to one connection (IDEMPOTENCY_PG_
            # SESSION_SETTINGS=server tells the library not to send them).
            init_query=init_query(),
        )
        self.dsn = dsn(self.proxy.endpoint)
        acknowledge_database_rules(self.cluster, keep=keep)

        self.schema = SchemaMigration(self, "Schema", store=self, layer=layer, options=options)
        # The migration connects through the proxy to the writer: the writer instance and the
        # proxy's target group must exist before it runs (the DSN alone names only the proxy).
        self.schema.resource.node.add_dependency(self.cluster, self.proxy)
        self.cleanup = ExpiredRecordCleanup(
            self,
            "Cleanup",
            store=self,
            layer=layer,
            interval=cleanup_interval,
            alarm_topic=alarm_topic,
            options=options,
        )
        self.alarms = [self.cleanup.alarm, self._capacity_alarm(alarm_topic)]
        if output:
            CfnOutput(Stack.of(self), outputs.IDEMPOTENCY_DSN, value=self.dsn)

    # The `RecordStore` shape (record_store.py), shared with `IdempotencyTable`.
    @property
    def function_environment(self) -> Mapping[str, str]:
        return {
            "IDEMPOTENCY_DSN": self.dsn,
            "IDEMPOTENCY_DB_IAM_AUTH": "true",
            "IDEMPOTENCY_PG_SESSION_SETTINGS": "server",
        }

    @property
    def function_network(self) -> Mapping[str, Any]:
        return {
            "vpc": self.network.vpc,
            "vpc_subnets": self.network.subnets,
            "security_groups": [self.network.functions],
        }

    @property
    def connect_arn(self) -> str:
        """The one `rds-db:connect` resource: the store's user on this proxy (by its resource
        id, the proxy ARN's last part), the ARN `DatabaseProxy.grant_connect` builds."""
        proxy_resource_id = Fn.select(6, Fn.split(":", self.proxy.db_proxy_arn))
        return Stack.of(self).format_arn(
            service="rds-db",
            resource="dbuser",
            resource_name=f"{proxy_resource_id}/{DATABASE_USER}",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )

    def grant_records(self, grantee: iam.IGrantable) -> None:
        """`rds-db:connect` as the store's user on this proxy, nothing else: which rows may be
        read and written is the database's business, not IAM's. (`grant_connect`, with a Sid.)"""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ConnectToStore", actions=["rds-db:connect"], resources=[self.connect_arn]
            )
        )

    def grant_batches(self, grantee: iam.IGrantable) -> None:
        """Nothing more: a batch is statements on the same connection `grant_records` allows."""

    def grant_pending_query(self, grantee: iam.IGrantable) -> None:
        self.grant_records(grantee)

    def wait_for_schema(self, function: Construct) -> None:
        """Create or update `function` only after the migration: new code never meets an old
        schema, and no consumer starts on a database without its tables."""
        function.node.add_dependency(self.schema.resource)

    def _capacity_alarm(self, topic: sns.ITopic | None) -> cloudwatch.Alarm:
        return add_alarm(
            self,
            "CapacityAlarm",
            metric=self.cluster.metric("ACUUtilization", statistic="Maximum", period=ALARM_PERIOD),
            threshold=CAPACITY_ALARM_PERCENT,
            description="The idempotency database is near its maximum capacity "
            "(serverless_v2_max_capacity): acquires and completions slow down",
            topic=topic,
        )

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        cluster = self.cluster
        return [
            cloudwatch.GraphWidget(
                title="Idempotency database capacity",
                left=[cluster.metric("ServerlessDatabaseCapacity", statistic="Maximum")],
                right=[cluster.metric("ACUUtilization", statistic="Maximum")],
                width=6,
            ),
            cloudwatch.GraphWidget(
                title="Idempotency database connections",
                left=[
                    cluster.metric_database_connections(statistic="Maximum"),
                    self._proxy_metric("ClientConnections"),
                ],
                width=6,
            ),
        ]

    def _proxy_metric(self, name: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/RDS",
            metric_name=name,
            dimensions_map={"ProxyName": self.proxy.db_proxy_name},
            statistic="Maximum",
            label=f"Proxy {name}",
        )
