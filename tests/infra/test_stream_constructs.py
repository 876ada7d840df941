"""The stream consumer constructs on their own (Kinesis, DynamoDB Streams, MSK and self-managed
Kafka): encryption, the event source mapping's error handling, the on-failure destination,
grants, alarms, the dashboard row, the synth-time rules and cdk-nag."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from exactly_once_cdk import (
    DynamoDbStreamConsumer,
    ExactlyOnceDashboard,
    IdempotencyTable,
    KafkaConsumer,
    KinesisStreamConsumer,
    MskCluster,
    SelfManagedKafka,
)
from exactly_once_cdk.kinesis_stream import READ_ACTIONS as KINESIS_READ
from exactly_once_cdk.stream_alarms import STREAM_MAPPING_METRICS
from exactly_once_cdk.tables import BATCH_ACTIONS, RECORD_ACTIONS
from tests.infra.test_template import actions, ref_id
from tests.infra.test_topic import INLINE, LAYER_ARN

CLUSTER_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/orders/0a1b2c3d-4e5f-6789"
# The shape every stream consumer's mapping has, whatever its source.
ERROR_HANDLING = {
    "StartingPosition": "TRIM_HORIZON",
    "FunctionResponseTypes": ["ReportBatchItemFailures"],
    "BisectBatchOnFunctionError": True,
    "MaximumRetryAttempts": 10,
    "MaximumRecordAgeInSeconds": 6 * 3600,
    "BatchSize": 100,
    "MetricsConfig": {"Metrics": ["EventCount"]},
    "Enabled": True,
}


def probe(app: App | None = None) -> tuple[Stack, IdempotencyTable, lambda_.ILayerVersion]:
    stack = Stack(app or App(), "Probe", env={"account": "123456789012", "region": "us-east-1"})
    table = IdempotencyTable(stack, "Idempotency")
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN)
    return stack, table, layer


def source_table(stack: Stack, construct_id: str = "Source", **props: Any) -> dynamodb.Table:
    return dynamodb.Table(
        stack,
        construct_id,
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        **{"stream": dynamodb.StreamViewType.NEW_IMAGE, **props},
    )


def template_of(stack: Stack) -> dict[str, Any]:
    return dict(Template.from_stack(stack).to_json())


def of_type(template: Mapping[str, Any], type_: str, prefix: str = "") -> dict[str, Any]:
    return {
        k: v
        for k, v in template["Resources"].items()
        if v["Type"] == type_ and k.startswith(prefix)
    }


def one(template: Mapping[str, Any], type_: str, prefix: str) -> tuple[str, dict[str, Any]]:
    [(logical_id, resource)] = of_type(template, type_, prefix).items()
    return logical_id, resource


def mapping_of(template: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return dict(one(template, "AWS::Lambda::EventSourceMapping", prefix)[1]["Properties"])


def statements_of(template: Mapping[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    """The role's policy statements by Sid (the role of the `<prefix>Function`)."""
    role_id, _ = one(template, "AWS::IAM::Role", f"{prefix}FunctionRole")
    [policy] = [
        p
        for p in of_type(template, "AWS::IAM::Policy").values()
        if [ref_id(r) for r in p["Properties"]["Roles"]] == [role_id]
    ]
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def alarms_of(template: Mapping[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    """By construct id (the logical id without the construct's prefix and the hash)."""
    return {
        k.removeprefix(prefix)[:-8]: v["Properties"]
        for k, v in of_type(template, "AWS::CloudWatch::Alarm", prefix).items()
    }


COMMON_ALARMS = {
    "IteratorAgeAlarm",
    "DeadLetterQueueNotEmptyAlarm",
    "DeadLetterQueueAgeAlarm",
    "OnFailureQueueNotEmptyAlarm",
    "DestinationDeliveryFailuresAlarm",
    "ErrorsAlarm",
    "ThrottlesAlarm",
    "UnfinishedWorkAlarm",
}


def queue_ids(template: Mapping[str, Any], prefix: str) -> tuple[str, str]:
    dlq, _ = one(template, "AWS::SQS::Queue", f"{prefix}DeadLetterQueue")
    on_failure, _ = one(template, "AWS::SQS::Queue", f"{prefix}OnFailureQueue")
    return dlq, on_failure


def assert_common(template: Mapping[str, Any], prefix: str, extra_sids: set[str]) -> None:
    """What every stream consumer has: both queues SSE-SQS and SSL-only, the DLQ's URL in the
    environment, the on-failure destination on the mapping, the store's and queues' grants."""
    dlq_id, on_failure_id = queue_ids(template, prefix)
    for queue_id in (dlq_id, on_failure_id):
        props = template["Resources"][queue_id]["Properties"]
        assert props["SqsManagedSseEnabled"] is True
        assert props["MessageRetentionPeriod"] == 14 * 86_400
        assert props["RedriveAllowPolicy"] == {"redrivePermission": "denyAll"}
        [policy] = [
            p
            for p in of_type(template, "AWS::SQS::QueuePolicy").values()
            if p["Properties"]["Queues"] == [{"Ref": queue_id}]
        ]
        [deny] = policy["Properties"]["PolicyDocument"]["Statement"]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    mapping = mapping_of(template, prefix)
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [on_failure_id, "Arn"]}}
    }
    function_id, function = one(template, "AWS::Lambda::Function", f"{prefix}Function")
    assert mapping["FunctionName"] == {"Ref": function_id}
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["DEAD_LETTER_QUEUE_URL"] == {"Ref": dlq_id}
    assert variables["CONSUMER_SCOPE"] == prefix.lower()
    # Lambda checks the role's rights when it creates the mapping.
    [(_, resource)] = [
        (k, v) for k, v in of_type(template, "AWS::Lambda::EventSourceMapping", prefix).items()
    ]
    role_id, _ = one(template, "AWS::IAM::Role", f"{prefix}FunctionRole")
    assert role_id in resource["DependsOn"]

    by_sid = statements_of(template, prefix)
    idem_id, _ = one(template, "AWS::DynamoDB::Table", "Idempotency")
    assert set(by_sid) == {
        "WriteOwnLogs",
        "IdempotencyRecords",
        "IdempotencyBatches",
        "SendGivenUpRecordsToDeadLetterQueue",
        "SendGivenUpBatchesToOnFailureQueue",
        *extra_sids,
    }
    assert sorted(actions(by_sid["IdempotencyRecords"])) == sorted(RECORD_ACTIONS)
    # The PartiQL batch grant (tables.grant_batches): the stream batch uses the store's batches.
    assert sorted(actions(by_sid["IdempotencyBatches"])) == sorted(BATCH_ACTIONS)
    assert ref_id(by_sid["IdempotencyBatches"]["Resource"]) == idem_id
    for sid, queue_id in (
        ("SendGivenUpRecordsToDeadLetterQueue", dlq_id),
        ("SendGivenUpBatchesToOnFailureQueue", on_failure_id),
    ):
        assert actions(by_sid[sid]) == ["sqs:SendMessage"]
        assert ref_id(by_sid[sid]["Resource"]) == queue_id
    alarms = alarms_of(template, prefix)
    for alarm_id, queue_id in (
        ("DeadLetterQueueNotEmptyAlarm", dlq_id),
        ("OnFailureQueueNotEmptyAlarm", on_failure_id),
    ):
        alarm = alarms[alarm_id]
        assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert alarm["Threshold"] == 1
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (1, 1)
        [dimension] = alarm["Dimensions"]
        assert dimension["Value"] == {"Fn::GetAtt": [queue_id, "QueueName"]}
    delivery = alarms["DestinationDeliveryFailuresAlarm"]
    assert (delivery["MetricName"], delivery["Namespace"]) == (
        "DestinationDeliveryFailures",
        "AWS/Lambda",
    )


class TestKinesis:
    @pytest.fixture(scope="class")
    @classmethod
    def template(cls) -> dict[str, Any]:
        stack, table, layer = probe()
        KinesisStreamConsumer(stack, "Orders", code=INLINE, table=table, layer=layer)
        return template_of(stack)

    def test_stream_under_the_aws_managed_key(self, template: dict[str, Any]) -> None:
        _, stream = one(template, "AWS::Kinesis::Stream", "OrdersStream")
        props = stream["Properties"]
        assert props["StreamEncryption"] == {"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"}
        assert (props["ShardCount"], props["RetentionPeriodHours"]) == (1, 24)
        assert stream["DeletionPolicy"] == "Retain"
        assert not of_type(template, "AWS::KMS::Key")

    def test_mapping_reads_the_stream_in_shard_order(self, template: dict[str, Any]) -> None:
        stream_id, _ = one(template, "AWS::Kinesis::Stream", "OrdersStream")
        mapping = mapping_of(template, "Orders")
        assert mapping["EventSourceArn"] == {"Fn::GetAtt": [stream_id, "Arn"]}
        assert {k: mapping[k] for k in ERROR_HANDLING} == ERROR_HANDLING
        assert mapping["ParallelizationFactor"] == 1
        assert mapping["MaximumBatchingWindowInSeconds"] == 0

    def test_queues_grants_and_alarms(self, template: dict[str, Any]) -> None:
        assert_common(template, "Orders", {"ReadStream"})
        stream_id, _ = one(template, "AWS::Kinesis::Stream", "OrdersStream")
        read = statements_of(template, "Orders")["ReadStream"]
        assert sorted(actions(read)) == sorted(KINESIS_READ)
        assert read["Resource"] == {"Fn::GetAtt": [stream_id, "Arn"]}

    def test_iterator_age_alarms_both_sides(self, template: dict[str, Any]) -> None:
        alarms = alarms_of(template, "Orders")
        assert set(alarms) == COMMON_ALARMS | {"StreamIteratorAgeAlarm"}
        lambda_age = alarms["IteratorAgeAlarm"]
        assert (lambda_age["Namespace"], lambda_age["MetricName"]) == ("AWS/Lambda", "IteratorAge")
        assert (lambda_age["Statistic"], lambda_age["Threshold"]) == ("Maximum", 600_000)
        stream_age = alarms["StreamIteratorAgeAlarm"]
        assert (stream_age["Namespace"], stream_age["MetricName"]) == (
            "AWS/Kinesis",
            "GetRecords.IteratorAgeMilliseconds",
        )
        assert stream_age["Threshold"] == 600_000
        for sustained in (lambda_age, stream_age):
            assert (sustained["EvaluationPeriods"], sustained["DatapointsToAlarm"]) == (3, 2)

    def test_outputs_never_read_as_an_sns_subscriber(self, template: dict[str, Any]) -> None:
        assert set(template["Outputs"]) >= {
            "OrdersFunctionName",
            "OrdersDeadLetterQueueArn",
            "OrdersOnFailureQueueArn",
            "OrdersStreamName",
            "OrdersStreamArn",
        }
        assert not [k for k in template["Outputs"] if k.endswith("QueueUrl")]

    def test_overrides(self) -> None:
        stack, table, layer = probe()
        key = kms.Key(stack, "StreamKey", enable_key_rotation=True)
        KinesisStreamConsumer(
            stack,
            "Fast",
            code=INLINE,
            table=table,
            layer=layer,
            encryption_key=key,
            parallelization_factor=4,
            batch_size=500,
            batching_window=Duration.seconds(2),
            retry_attempts=None,
            max_record_age=None,
            max_attempts=3,
            iterator_age_alarm=Duration.minutes(2),
            stream_props={"shard_count": 4},
            mapping_enabled=False,
        )
        template = template_of(stack)
        key_id, _ = one(template, "AWS::KMS::Key", "StreamKey")
        stream = one(template, "AWS::Kinesis::Stream", "FastStream")[1]["Properties"]
        assert stream["StreamEncryption"] == {
            "EncryptionType": "KMS",
            "KeyId": {"Fn::GetAtt": [key_id, "Arn"]},
        }
        assert stream["ShardCount"] == 4
        decrypt = statements_of(template, "Fast")["DecryptStream"]
        assert (actions(decrypt), decrypt["Resource"]) == (
            ["kms:Decrypt"],
            {"Fn::GetAtt": [key_id, "Arn"]},
        )
        mapping = mapping_of(template, "Fast")
        # None is Lambda's infinite (-1): the keys are left out.
        assert "MaximumRetryAttempts" not in mapping
        assert "MaximumRecordAgeInSeconds" not in mapping
        assert (mapping["ParallelizationFactor"], mapping["BatchSize"]) == (4, 500)
        assert (mapping["MaximumBatchingWindowInSeconds"], mapping["Enabled"]) == (2, False)
        function = one(template, "AWS::Lambda::Function", "FastFunction")[1]
        assert function["Properties"]["Environment"]["Variables"]["STREAM_MAX_ATTEMPTS"] == "3"
        assert alarms_of(template, "Fast")["IteratorAgeAlarm"]["Threshold"] == 120_000

    def test_mapping_follows_the_local_stack_context(self) -> None:
        app = App(context={"localStack": True})
        stack, table, layer = probe(app)
        KinesisStreamConsumer(stack, "Local", code=INLINE, table=table, layer=layer)
        assert mapping_of(template_of(stack), "Local")["Enabled"] is False

    @pytest.mark.parametrize(
        ("keywords", "message"),
        [
            ({"parallelization_factor": 11}, "parallelization_factor 11 is outside 1..10"),
            ({"retry_attempts": 10_001}, "retry_attempts 10001 is outside 0..10000"),
            ({"max_record_age": Duration.seconds(30)}, "max_record_age 30 is outside"),
            ({"batch_size": 0}, "batch_size 0 is outside 1..10000"),
            ({"batching_window": Duration.seconds(301)}, "batching_window 301 is outside"),
            ({"retry_attempts": 2, "max_attempts": 4}, "max_attempts 4 is over the mapping's 3"),
            ({"max_attempts": 0}, "max_attempts 0 must be 1 or more"),
        ],
    )
    def test_refused_at_synth(self, keywords: dict[str, Any], message: str) -> None:
        stack, table, layer = probe()
        with pytest.raises(ValueError, match=message):
            KinesisStreamConsumer(stack, "Bad", code=INLINE, table=table, layer=layer, **keywords)

    def test_max_attempts_within_the_mappings_invocations(self) -> None:
        stack, table, layer = probe()
        KinesisStreamConsumer(
            stack, "Edge", code=INLINE, table=table, layer=layer, retry_attempts=2, max_attempts=3
        )
        function = one(template_of(stack), "AWS::Lambda::Function", "EdgeFunction")[1]
        assert function["Properties"]["Environment"]["Variables"]["STREAM_MAX_ATTEMPTS"] == "3"


class TestDynamoDbStream:
    @pytest.fixture(scope="class")
    @classmethod
    def template(cls) -> dict[str, Any]:
        stack, table, layer = probe()
        DynamoDbStreamConsumer(
            stack,
            "Changes",
            source_table=source_table(stack),
            code=INLINE,
            table=table,
            layer=layer,
        )
        return template_of(stack)

    def test_mapping_reads_the_tables_stream(self, template: dict[str, Any]) -> None:
        source_id, _ = one(template, "AWS::DynamoDB::Table", "Source")
        mapping = mapping_of(template, "Changes")
        assert mapping["EventSourceArn"] == {"Fn::GetAtt": [source_id, "StreamArn"]}
        assert {k: mapping[k] for k in ERROR_HANDLING} == ERROR_HANDLING
        assert mapping["ParallelizationFactor"] == 1

    def test_grants_the_stream_and_lists_streams_alone_unscoped(
        self, template: dict[str, Any]
    ) -> None:
        assert_common(template, "Changes", {"ReadTableStream", "ListTableStreams"})
        source_id, _ = one(template, "AWS::DynamoDB::Table", "Source")
        by_sid = statements_of(template, "Changes")
        assert sorted(actions(by_sid["ReadTableStream"])) == [
            "dynamodb:DescribeStream",
            "dynamodb:GetRecords",
            "dynamodb:GetShardIterator",
        ]
        assert by_sid["ReadTableStream"]["Resource"] == {"Fn::GetAtt": [source_id, "StreamArn"]}
        assert by_sid["ListTableStreams"]["Resource"] == "*"
        assert actions(by_sid["ListTableStreams"]) == ["dynamodb:ListStreams"]
        unscoped = [s for s in by_sid.values() if s["Resource"] == "*"]
        assert unscoped == [by_sid["ListTableStreams"]]

    def test_alarms(self, template: dict[str, Any]) -> None:
        alarms = alarms_of(template, "Changes")
        assert set(alarms) == COMMON_ALARMS
        assert alarms["IteratorAgeAlarm"]["MetricName"] == "IteratorAge"

    def test_a_table_without_a_stream_is_refused(self) -> None:
        stack, table, layer = probe()
        plain = source_table(stack, "Plain", stream=None)
        with pytest.raises(ValueError, match="the source table has no stream"):
            DynamoDbStreamConsumer(
                stack, "Nothing", source_table=plain, code=INLINE, table=table, layer=layer
            )

    def test_a_customer_key_on_the_table_is_granted(self) -> None:
        stack, table, layer = probe()
        key = kms.Key(stack, "TableKey", enable_key_rotation=True)
        encrypted = source_table(
            stack,
            "Encrypted",
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=key,
        )
        DynamoDbStreamConsumer(
            stack, "Secret", source_table=encrypted, code=INLINE, table=table, layer=layer
        )
        template = template_of(stack)
        key_id, _ = one(template, "AWS::KMS::Key", "TableKey")
        decrypt = statements_of(template, "Secret")["DecryptTableStream"]
        assert (actions(decrypt), decrypt["Resource"]) == (
            ["kms:Decrypt"],
            {"Fn::GetAtt": [key_id, "Arn"]},
        )


class TestKafka:
    @pytest.fixture(scope="class")
    @classmethod
    def template(cls) -> dict[str, Any]:
        stack, table, layer = probe()
        KafkaConsumer(
            stack,
            "Events",
            source=MskCluster(CLUSTER_ARN),
            topic="orders",
            code=INLINE,
            table=table,
            layer=layer,
        )
        return template_of(stack)

    def test_msk_mapping_in_provisioned_mode(self, template: dict[str, Any]) -> None:
        mapping = mapping_of(template, "Events")
        assert mapping["EventSourceArn"] == CLUSTER_ARN
        assert mapping["Topics"] == ["orders"]
        assert {k: mapping[k] for k in ERROR_HANDLING} == ERROR_HANDLING
        assert mapping["ProvisionedPollerConfig"] == {"MinimumPollers": 1, "MaximumPollers": 200}
        assert mapping["AmazonManagedKafkaEventSourceConfig"] == {"ConsumerGroupId": "Probe-Events"}
        # No parallelization factor (Kafka has none), Lambda's 500 ms window, IAM access control.
        for absent in ("ParallelizationFactor", "MaximumBatchingWindowInSeconds"):
            assert absent not in mapping
        assert "SourceAccessConfigurations" not in mapping

    def test_iam_access_names_this_cluster_topic_and_group(self, template: dict[str, Any]) -> None:
        assert_common(
            template,
            "Events",
            {
                "DescribeKafkaCluster",
                "ConnectToKafkaCluster",
                "ReadKafkaTopic",
                "CommitKafkaGroupOffsets",
                "AttachPollersToKafkaVpc",
            },
        )
        by_sid = statements_of(template, "Events")
        assert by_sid["DescribeKafkaCluster"]["Resource"] == CLUSTER_ARN
        assert by_sid["ConnectToKafkaCluster"]["Resource"] == CLUSTER_ARN
        topic = json.dumps(by_sid["ReadKafkaTopic"]["Resource"])
        assert ":topic/" in topic
        assert "/orders" in topic
        assert sorted(actions(by_sid["ReadKafkaTopic"])) == [
            "kafka-cluster:DescribeTopic",
            "kafka-cluster:ReadData",
        ]
        group = json.dumps(by_sid["CommitKafkaGroupOffsets"]["Resource"])
        assert ":group/" in group
        assert "/Probe-Events" in group
        # The only unscoped statement: Lambda's pollers' network interfaces.
        unscoped = [sid for sid, s in by_sid.items() if s["Resource"] == "*"]
        assert unscoped == ["AttachPollersToKafkaVpc"]
        assert all(a.startswith("ec2:") for a in actions(by_sid["AttachPollersToKafkaVpc"]))
        for role in of_type(template, "AWS::IAM::Role").values():
            assert "ManagedPolicyArns" not in role["Properties"]  # no AWSLambdaMSKExecutionRole

    def test_offset_lag_alarm(self, template: dict[str, Any]) -> None:
        alarms = alarms_of(template, "Events")
        assert set(alarms) == COMMON_ALARMS
        lag = alarms["IteratorAgeAlarm"]
        assert (lag["Namespace"], lag["MetricName"], lag["Threshold"]) == (
            "AWS/Lambda",
            "OffsetLag",
            10_000,
        )

    def test_msk_with_a_scram_secret(self) -> None:
        stack, table, layer = probe()
        secret = secretsmanager.Secret.from_secret_name_v2(stack, "Creds", "kafka-creds")
        KafkaConsumer(
            stack,
            "Scram",
            source=MskCluster(CLUSTER_ARN, secret=secret),
            topic="orders",
            code=INLINE,
            table=table,
            layer=layer,
            min_pollers=2,
            max_pollers=10,
            poller_group_name="orders",
            consumer_group_id="orders-group",
        )
        template = template_of(stack)
        mapping = mapping_of(template, "Scram")
        [access] = mapping["SourceAccessConfigurations"]
        assert access["Type"] == "SASL_SCRAM_512_AUTH"
        assert mapping["ProvisionedPollerConfig"] == {
            "MinimumPollers": 2,
            "MaximumPollers": 10,
            "PollerGroupName": "orders",
        }
        assert mapping["AmazonManagedKafkaEventSourceConfig"] == {"ConsumerGroupId": "orders-group"}
        by_sid = statements_of(template, "Scram")
        assert actions(by_sid["ReadKafkaCredentials"]) == ["secretsmanager:GetSecretValue"]
        assert not {"ConnectToKafkaCluster", "ReadKafkaTopic"} & set(by_sid)

    def test_self_managed_in_a_vpc(self) -> None:
        stack, table, layer = probe()
        vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0, restrict_default_security_group=True)
        ec2.FlowLog(stack, "VpcFlowLog", resource_type=ec2.FlowLogResourceType.from_vpc(vpc))
        group = ec2.SecurityGroup(stack, "Brokers", vpc=vpc)
        secret = secretsmanager.Secret.from_secret_name_v2(stack, "Creds", "kafka-creds")
        KafkaConsumer(
            stack,
            "Own",
            source=SelfManagedKafka(
                bootstrap_servers=["b-1.example:9096"],
                secret=secret,
                subnets=vpc.private_subnets or vpc.isolated_subnets or vpc.public_subnets,
                security_groups=[group],
            ),
            topic="orders",
            code=INLINE,
            table=table,
            layer=layer,
        )
        template = template_of(stack)
        mapping = mapping_of(template, "Own")
        assert mapping["SelfManagedEventSource"] == {
            "Endpoints": {"KafkaBootstrapServers": ["b-1.example:9096"]}
        }
        assert "EventSourceArn" not in mapping
        types = [a["Type"] for a in mapping["SourceAccessConfigurations"]]
        assert types == ["SASL_SCRAM_512_AUTH", "VPC_SUBNET", "VPC_SECURITY_GROUP"]
        assert mapping["ProvisionedPollerConfig"] == {"MinimumPollers": 1, "MaximumPollers": 200}
        assert "AttachPollersToKafkaVpc" in statements_of(template, "Own")

    def test_self_managed_outside_a_vpc_has_no_network_grant(self) -> None:
        stack, table, layer = probe()
        secret = secretsmanager.Secret.from_secret_name_v2(stack, "Creds", "kafka-creds")
        KafkaConsumer(
            stack,
            "Public",
            source=SelfManagedKafka(bootstrap_servers=["b-1.example:9096"], secret=secret),
            topic="orders",
            code=INLINE,
            table=table,
            layer=layer,
        )
        by_sid = statements_of(template_of(stack), "Public")
        assert [sid for sid, s in by_sid.items() if s["Resource"] == "*"] == []

    @pytest.mark.parametrize(
        ("pollers", "message"),
        [
            ({"min_pollers": 0}, "min_pollers 0 is outside 1..200"),
            ({"max_pollers": 2001}, "max_pollers 2001 is outside 1..2000"),
            ({"min_pollers": 5, "max_pollers": 4}, "min_pollers 5 is over max_pollers 4"),
        ],
    )
    def test_pollers_refused_at_synth(self, pollers: dict[str, int], message: str) -> None:
        stack, table, layer = probe()
        with pytest.raises(ValueError, match=message):
            KafkaConsumer(
                stack,
                "Bad",
                source=MskCluster(CLUSTER_ARN),
                topic="orders",
                code=INLINE,
                table=table,
                layer=layer,
                min_pollers=pollers.get("min_pollers", 1),
                max_pollers=pollers.get("max_pollers", 200),
            )


def test_dashboard_row_per_stream_consumer() -> None:
    stack, table, layer = probe()
    kinesis = KinesisStreamConsumer(stack, "Orders", code=INLINE, table=table, layer=layer)
    kafka = KafkaConsumer(
        stack,
        "Events",
        source=MskCluster(CLUSTER_ARN),
        topic="orders",
        code=INLINE,
        table=table,
        layer=layer,
    )
    ExactlyOnceDashboard(stack, "Dashboard", consumers=[], streams=[kinesis, kafka])
    [dashboard] = of_type(template_of(stack), "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for title in ("lag", "dead-letter queue", "on-failure queue", "started minus finished"):
        for name in ("Orders", "Events"):
            assert f"{name} {title}" in body, (name, title)
    assert "GetRecords.IteratorAgeMilliseconds" in body
    assert "OffsetLag" in body
    for metric in STREAM_MAPPING_METRICS:
        assert metric in body
    assert "DeletedEventCount" not in body  # an SQS-only count
    assert len(kinesis.dashboard_widgets()) == 7


def test_nag_clean_and_a_weakened_queue_is_caught(tmp_path: Path) -> None:
    """Every construct with its defaults (and Kinesis under a customer key) passes
    AwsSolutionsChecks; an on-failure queue opened to plain HTTP is still found."""
    app = App(outdir=str(tmp_path))
    stack, table, layer = probe(app)
    KinesisStreamConsumer(stack, "Orders", code=INLINE, table=table, layer=layer)
    KinesisStreamConsumer(
        stack,
        "Keyed",
        code=INLINE,
        table=table,
        layer=layer,
        encryption_key=kms.Key(stack, "StreamKey", enable_key_rotation=True),
    )
    DynamoDbStreamConsumer(
        stack, "Changes", source_table=source_table(stack), code=INLINE, table=table, layer=layer
    )
    secret = secretsmanager.Secret.from_secret_name_v2(stack, "Creds", "kafka-creds")
    KafkaConsumer(
        stack,
        "Events",
        source=MskCluster(CLUSTER_ARN),
        topic="orders",
        code=INLINE,
        table=table,
        layer=layer,
    )
    KafkaConsumer(
        stack,
        "Own",
        source=SelfManagedKafka(bootstrap_servers=["b-1.example:9096"], secret=secret),
        topic="orders",
        code=INLINE,
        table=table,
        layer=layer,
    )
    KinesisStreamConsumer(
        stack,
        "Open",
        code=INLINE,
        table=table,
        layer=layer,
        on_failure_queue_props={"enforce_ssl": False},
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    found = {
        (v["ruleName"], c["constructPath"].split("/")[1])
        for p in report["pluginReports"]
        if p["pluginName"] == "AwsSolutions"
        for v in p["violations"]
        for c in v["violatingConstructs"]
    }
    assert found == {("AwsSolutions-SQS4", "Open")}
