"""`KafkaConsumer`: a consumer of one Kafka topic, on Amazon MSK (`MskCluster`) or a self-managed
cluster (`SelfManagedKafka`), in provisioned mode, with the stream consumers' shared queues,
alarms and grants (`stream_consumer`).

Provisioned mode always: Lambda's Kafka error handling (MaximumRetryAttempts,
MaximumRecordAgeInSeconds, BisectBatchOnFunctionError and ReportBatchItemFailures, whose
`{"partition": "<topic>-<partition>", "offset": n}` items the handler answers with) is
available on provisioned mappings only. The installed aws-cdk-lib (2.275) takes
`provisioned_poller_config` on `lambda_.EventSourceMapping` itself, so no escape hatch is needed.
Its minimum pollers are billed around the clock (event poller units), records or not.

The mapping is made directly rather than through `ManagedKafkaEventSource`, which attaches the
AWS-managed AWSLambdaMSKExecutionRole policy (cdk-nag IAM4, and EC2 and Kafka actions on every
cluster): the grants below name this cluster, topic and group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from aws_cdk import Acknowledgment, Duration, Fn, Stack, Token, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from exactly_once_cdk.record_store import RecordStore
from exactly_once_cdk.stream_alarms import offset_lag
from exactly_once_cdk.stream_consumer import StreamConsumerBase, StreamConsumerOptions
from exactly_once_cdk.stream_rules import check_kafka_pollers

MIN_POLLERS = 1  # AWS's default minimum for Kafka
MAX_POLLERS = 200  # AWS's default maximum for Kafka
OFFSET_LAG_ALARM = 10_000  # records
# Lambda attaches its pollers to the cluster's VPC through network interfaces it creates with
# the function's role (Lambda developer guide, MSK and self-managed Kafka execution role).
NETWORK_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeVpcs",
)


def _cluster_child_arn(cluster_arn: str, kind: str, name: str) -> str:
    """A topic's or group's ARN from its cluster's: the cluster's partition, region, account,
    name and UUID, with "cluster/" turned into "topic/" or "group/". A token ARN (a cluster in
    the same app, an import) is split by CloudFormation: `Arn.split` of a token keeps only
    the cluster's name, which no topic or group ARN matches, without its UUID."""
    if not Token.is_unresolved(cluster_arn):
        head, _, tail = cluster_arn.partition(":cluster/")
        return f"{head}:{kind}/{tail}/{name}"
    parts = Fn.split(":cluster/", cluster_arn, 2)
    return Fn.join("", [Fn.select(0, parts), f":{kind}/", Fn.select(1, parts), f"/{name}"])


@dataclass(frozen=True)
class MskCluster:
    """An Amazon MSK cluster. Without `secret`, Lambda authenticates with the function's role
    (IAM access control: the role is granted Connect, the topic's reads and the group's
    offsets); with one, SASL/SCRAM-512 with that Secrets Manager secret."""

    cluster_arn: str
    secret: secretsmanager.ISecret | None = None


@dataclass(frozen=True)
class SelfManagedKafka:
    """A cluster you run. `secret` holds its credentials for `authentication` (SASL/SCRAM-512
    by default; BASIC_AUTH, SASL_SCRAM_256_AUTH, CLIENT_CERTIFICATE_TLS_AUTH); a cluster in a
    VPC takes its `subnets` and `security_groups`, which Lambda's pollers attach to."""

    bootstrap_servers: Sequence[str]
    secret: secretsmanager.ISecret
    authentication: lambda_.SourceAccessConfigurationType = (
        lambda_.SourceAccessConfigurationType.SASL_SCRAM_512_AUTH
    )
    subnets: Sequence[ec2.ISubnet] = field(default=())
    security_groups: Sequence[ec2.ISecurityGroup] = field(default=())


class KafkaConsumer(StreamConsumerBase):
    """The consumer of `topic` on `source`. `consumer_group_id` defaults to
    "<stack name>-<construct id>" (stable across replacements of the mapping, so the group's
    committed offsets survive; it cannot change once made). Records run in order per
    topic-partition, partitions in parallel. `min_pollers`/`max_pollers` bound the provisioned
    pollers (AWS's defaults 1 and 200), `poller_group_name` shares their capacity between
    mappings in one VPC. `batching_window` None keeps Lambda's 500 ms for Kafka.
    `offset_lag_alarm` is in records, on Lambda's `OffsetLag`. Other keywords:
    `StreamConsumerOptions`.
    """

    source_label = "Kafka"
    source_kind = "kafka"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        source: MskCluster | SelfManagedKafka,
        topic: str,
        code: lambda_.Code,
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        consumer_group_id: str | None = None,
        min_pollers: int = MIN_POLLERS,
        max_pollers: int = MAX_POLLERS,
        poller_group_name: str | None = None,
        batching_window: Duration | None = None,
        offset_lag_alarm: int = OFFSET_LAG_ALARM,
        **options: Unpack[StreamConsumerOptions],
    ) -> None:
        check_kafka_pollers(construct_id, min_pollers=min_pollers, max_pollers=max_pollers)
        super().__init__(scope, construct_id, code=code, table=table, layer=layer, options=options)
        self.source = source
        self.topic = topic
        self.consumer_group_id = consumer_group_id or f"{Stack.of(self).stack_name}-{construct_id}"
        keywords: dict[str, Any] = {
            "kafka_topic": topic,
            "kafka_consumer_group_id": self.consumer_group_id,
            "provisioned_poller_config": lambda_.ProvisionedPollerConfig(
                minimum_pollers=min_pollers,
                maximum_pollers=max_pollers,
                poller_group_name=poller_group_name,
            ),
        }
        if isinstance(source, MskCluster):
            keywords["event_source_arn"] = source.cluster_arn
            access = self._msk_access(source)
        else:
            keywords["kafka_bootstrap_servers"] = list(source.bootstrap_servers)
            access = self._self_managed_access(source)
        if access:  # none for MSK's IAM access control (CloudFormation refuses an empty list)
            keywords["source_access_configurations"] = access
        self._grant_network()
        self._event_source_mapping(
            keywords, batching_window=batching_window, parallelization_factor=None
        )
        self._finish(
            offset_lag(self.function),
            offset_lag_alarm,
            f"{construct_id}: the consumer group trails the topic (OffsetLag)",
        )

    def _grant_secret(self, secret: secretsmanager.ISecret) -> None:
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadKafkaCredentials",
                actions=["secretsmanager:GetSecretValue"],
                resources=[secret.secret_arn],
            )
        )
        if secret.encryption_key is not None:
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="DecryptKafkaCredentials",
                    actions=["kms:Decrypt"],
                    resources=[secret.encryption_key.key_arn],
                )
            )

    def _msk_access(self, source: MskCluster) -> list[lambda_.SourceAccessConfiguration]:
        """The cluster's bootstrap brokers, then SASL/SCRAM with the secret, or IAM access
        control on this cluster, topic and consumer group."""
        arn = source.cluster_arn
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="DescribeKafkaCluster",
                actions=["kafka:DescribeClusterV2", "kafka:GetBootstrapBrokers"],
                resources=[arn],
            )
        )
        if source.secret is not None:
            self._grant_secret(source.secret)
            return [
                lambda_.SourceAccessConfiguration(
                    type=lambda_.SourceAccessConfigurationType.SASL_SCRAM_512_AUTH,
                    uri=source.secret.secret_arn,
                )
            ]
        # arn:<partition>:kafka:<region>:<account>:cluster/<name>/<uuid>: the topic's and the
        # group's ARNs are "topic/<name>/<uuid>/<topic>" and "group/<name>/<uuid>/<group>".
        for sid, actions, resource in (
            (
                "ConnectToKafkaCluster",
                ["kafka-cluster:Connect", "kafka-cluster:DescribeClusterDynamicConfiguration"],
                arn,
            ),
            (
                "ReadKafkaTopic",
                ["kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"],
                _cluster_child_arn(arn, "topic", self.topic),
            ),
            (
                "CommitKafkaGroupOffsets",
                ["kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup"],
                _cluster_child_arn(arn, "group", self.consumer_group_id),
            ),
        ):
            self.role.add_to_policy(
                iam.PolicyStatement(sid=sid, actions=actions, resources=[resource])
            )
        return []

    def _self_managed_access(
        self, source: SelfManagedKafka
    ) -> list[lambda_.SourceAccessConfiguration]:
        self._grant_secret(source.secret)
        access = [
            lambda_.SourceAccessConfiguration(
                type=source.authentication, uri=source.secret.secret_arn
            )
        ]
        access += [
            lambda_.SourceAccessConfiguration(
                type=lambda_.SourceAccessConfigurationType.VPC_SUBNET,
                uri=f"subnet:{subnet.subnet_id}",
            )
            for subnet in source.subnets
        ]
        access += [
            lambda_.SourceAccessConfiguration(
                type=lambda_.SourceAccessConfigurationType.VPC_SECURITY_GROUP,
                uri=f"security_group:{group.security_group_id}",
            )
            for group in source.security_groups
        ]
        return access

    def _grant_network(self) -> None:
        """MSK always, a self-managed cluster in a VPC: Lambda's pollers reach the brokers
        through network interfaces it creates in the cluster's subnets with this role."""
        source = self.source
        if isinstance(source, SelfManagedKafka) and not source.subnets:
            return
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="AttachPollersToKafkaVpc", actions=list(NETWORK_ACTIONS), resources=["*"]
            )
        )
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Lambda's Kafka pollers attach to the cluster's VPC "
                "(AttachPollersToKafkaVpc): ec2:CreateNetworkInterface and the ec2:Describe* "
                "actions work only on Resource '*' (Lambda developer guide, "
                "AWSLambdaMSKExecutionRole); the network interfaces do not exist before Lambda "
                "creates them, so there is no ARN to name.",
            )
        )
