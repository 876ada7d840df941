"""`StoreNetwork`: the PostgreSQL store's VPC, with isolated subnets only, and who may talk to whom.

No NAT gateway and no internet gateway: nothing in it reaches the internet, and nothing on the
internet reaches it. Four security groups, none allowing any outbound traffic by default, with
exactly these rules:
    functions --5432--> RDS Proxy --5432--> database;  functions --443--> interface endpoints.
(A group whose every egress rule is a separate resource has no inline rule at all: CloudFormation
drops a group's default allow-all egress as soon as one egress rule is added.)

What the functions call from inside the VPC decides the endpoints (`interface_endpoints`):
- the store: RDS Proxy on 5432, inside the VPC. An RDS IAM token is signed locally by boto3
  (`generate_db_auth_token` makes no request), so no RDS or STS endpoint is needed;
- SQS: consumers and SNS subscribers send permanently failed records to their dead-letter queue
  (`DEAD_LETTER_QUEUE_URL`), hence the one default interface endpoint. Lambda itself polls the
  queues and delivers on-failure destinations from outside the VPC;
- nothing publishes to SNS from a function, and the schema migration authenticates with IAM
  like the rest (postgres_jobs.py), so there is no SNS and no Secrets Manager endpoint;
- logs and metrics (EMF) leave through Lambda's own log stream, not the VPC. Active tracing's
  segments are Lambda's too; code that sends its own with the X-Ray SDK needs an X-Ray endpoint;
- DynamoDB: nothing of this stack uses it on the PostgreSQL store (the examples' ledger moves
  into PostgreSQL), so no gateway endpoint. Pass `gateway_endpoints` (free) when your functions
  still use DynamoDB or S3.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

PORT = 5432  # PostgreSQL's, on the proxy and the database alike
HTTPS = 443
DEFAULT_INTERFACE_ENDPOINTS: tuple[ec2.InterfaceVpcEndpointAwsService, ...] = (
    ec2.InterfaceVpcEndpointAwsService.SQS,
)


class StoreNetwork(Construct):
    """A VPC of `max_azs` isolated subnets (the cluster's subnet group needs two AZs), its
    rejected traffic in a flow log, the security groups, and the endpoints the functions use."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        max_azs: int = 2,
        interface_endpoints: Sequence[ec2.InterfaceVpcEndpointAwsService] = (
            DEFAULT_INTERFACE_ENDPOINTS
        ),
        gateway_endpoints: Sequence[ec2.GatewayVpcEndpointAwsService] = (),
        flow_log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        # Rejected flows only: they answer "why can't my function connect" at a fraction of the
        # ingestion cost of logging every accepted packet.
        flow_logs = logs.LogGroup(
            self, "FlowLogs", retention=flow_log_retention, removal_policy=removal_policy
        )
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=max_azs,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="Isolated", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24
                )
            ],
            flow_logs={
                "Rejected": ec2.FlowLogOptions(
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs),
                    traffic_type=ec2.FlowLogTrafficType.REJECT,
                )
            },
        )
        self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        self.functions = self._group("Functions", "Lambda functions that use the store")
        # (CloudFormation refuses apostrophes in a group's description.)
        self.proxy = self._group("Proxy", "RDS Proxy in front of the store database")
        self.database = self._group("Database", "The store Aurora PostgreSQL cluster")
        # Proxy to database: `rds.DatabaseProxy` adds that rule itself (on the cluster's port).
        self.functions.connections.allow_to(self.proxy, ec2.Port.tcp(PORT), "To RDS Proxy")
        self.endpoints: ec2.SecurityGroup | None = None
        if interface_endpoints:
            self.endpoints = self._group("Endpoints", "Interface endpoints the functions call")
            self.functions.connections.allow_to(
                self.endpoints, ec2.Port.tcp(HTTPS), "To the interface endpoints"
            )
        for service in interface_endpoints:
            self.vpc.add_interface_endpoint(
                _endpoint_id(service.short_name),
                service=service,
                subnets=self.subnets,
                security_groups=[self.endpoints] if self.endpoints else None,
                private_dns_enabled=True,  # the SDK's default endpoint URLs resolve to it
                open=False,  # only the functions' group, not the whole VPC CIDR
            )
        for gateway in gateway_endpoints:
            self.vpc.add_gateway_endpoint(
                _endpoint_id(gateway.name.split(".")[-1]),
                service=gateway,
                subnets=[self.subnets],
            )

    def _group(self, construct_id: str, description: str) -> ec2.SecurityGroup:
        return ec2.SecurityGroup(
            self,
            construct_id,
            vpc=self.vpc,
            description=description,
            allow_all_outbound=False,
        )


def _endpoint_id(service_name: str) -> str:
    """ "sqs" -> "SqsEndpoint", "secretsmanager" -> "SecretsmanagerEndpoint"."""
    return service_name.replace("-", " ").replace(".", " ").title().replace(" ", "") + "Endpoint"
