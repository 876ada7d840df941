"""What the synthesized template must say (moto drops TTL, PITR, layers and queue policies, so
these settings are checked here rather than after the local deploy)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from exactly_once import ledger, observability
from exactly_once.outcomes import Outcome, RecordResult
from exactly_once.stores import schema
from exactly_once_cdk.alarms import ONE_EVENT, SUSTAINED, Evaluation
from exactly_once_cdk.lock_monitor import HEARTBEAT
from exactly_once_cdk.tables import BATCH_ACTIONS, RECORD_ACTIONS
from exactly_once_cdk.widgets import EVENT_SOURCE_MAPPING_METRICS, OUTCOME_METRICS
from infra.apis import APIS
from infra.consumers import CONSUMERS
from infra.streams import STREAMS
from infra.topics import TOPICS
from tests.infra.conftest import Synth

# Counts follow the registries: adding a consumer, API, topic or subscriber changes no test.
CONSUMER_IDS = tuple(spec.id for spec in CONSUMERS)
SUBSCRIBERS = tuple(sub for topic in TOPICS for sub in topic.subscribers)
OUTPUTS = {
    *(
        f"{cid}{suffix}"
        for cid in CONSUMER_IDS
        for suffix in (
            "QueueUrl",
            "QueueArn",
            "DeadLetterQueueUrl",
            "DeadLetterQueueArn",
            "FunctionName",
        )
    ),
    *(f"{api.id}{suffix}" for api in APIS for suffix in ("FunctionName", "Url", "ApiId")),
    *(f"{topic.id}TopicArn" for topic in TOPICS),
    *(
        f"{stream.id}{suffix}"
        for stream in STREAMS
        for suffix in (
            "FunctionName",
            "DeadLetterQueueArn",
            "OnFailureQueueArn",
            "StreamName",
            "StreamArn",
        )
    ),
    *(
        f"{sub.id}{suffix}"
        for sub in SUBSCRIBERS
        for suffix in ("FunctionName", "DeadLetterQueueUrl", "DeadLetterQueueArn")
    ),
    "IdempotencyTableName",
    "LedgerTableName",
    "LockMonitorFunctionName",
    "AlarmTopicArn",
}
# Deployed into moto the HTTP API is left out (no ApiGatewayV2 in moto's CloudFormation); its
# function and FunctionName output stay. Topics and subscribers keep every output.
LOCAL_OUTPUTS = OUTPUTS - {f"{api.id}{suffix}" for api in APIS for suffix in ("Url", "ApiId")}
# Alarms per entry point; each entry point's function adds errors, throttles and started minus
# finished (alarms.function_alarms).
FUNCTION_ALARMS = 3
CONSUMER_ALARMS = 3 + FUNCTION_ALARMS  # DLQ depth, DLQ age, queue age
API_ALARMS = 1 + FUNCTION_ALARMS  # 5xx
SUBSCRIBER_ALARMS = 3 + FUNCTION_ALARMS  # DLQ depth, DLQ age, destination delivery failures
TOPIC_ALARMS = 1  # deliveries SNS gave up on
# Lambda's IteratorAge, the stream's GetRecords age, DLQ depth, DLQ age, the on-failure queue's
# depth, on-failure delivery failures
STREAM_ALARMS = 6 + FUNCTION_ALARMS
# table throttles (2), the idempotency table's pending-index throttles and transaction
# conflicts (2), the monitor (stuck locks, overdue work, errors)
STACK_ALARMS = 2 + 2 + 3


def ref_id(value: Any) -> str:
    """The logical id behind a {"Ref": id} or {"Fn::GetAtt": [id, attr]}."""
    if "Ref" in value:
        return str(value["Ref"])
    return str(value["Fn::GetAtt"][0])


def statements(synth: Synth) -> list[tuple[str, dict[str, Any]]]:
    """Every policy statement in the template, with the logical id of the policy's owner."""
    found: list[tuple[str, dict[str, Any]]] = []
    for logical_id, resource in synth.template["Resources"].items():
        props = resource.get("Properties", {})
        documents = [props.get(key) for key in ("PolicyDocument", "KeyPolicy")]
        documents += [p["PolicyDocument"] for p in props.get("Policies", [])]
        for document in filter(None, documents):
            found += [(logical_id, s) for s in document["Statement"]]
    return found


def actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def role_statements(synth: Synth, role_prefix: str) -> dict[str | None, dict[str, Any]]:
    """Statements by Sid of the policy attached to the role with this logical-id prefix."""
    role_id, _ = synth.resource("AWS::IAM::Role", role_prefix)
    policies = [
        p
        for p in synth.resources("AWS::IAM::Policy").values()
        if [ref_id(r) for r in p["Properties"]["Roles"]] == [role_id]
    ]
    assert len(policies) == 1
    # X-Ray's statements (xray=true) come without a Sid: they are under None.
    return {s.get("Sid"): s for s in policies[0]["Properties"]["PolicyDocument"]["Statement"]}


class TestQueues:
    @pytest.mark.parametrize("cid", CONSUMER_IDS)
    def test_both_queues_are_sse_sqs_and_ssl_only(self, default_synth: Synth, cid: str) -> None:
        for prefix in (f"{cid}Queue", f"{cid}DeadLetterQueue"):
            queue_id, queue = default_synth.resource("AWS::SQS::Queue", prefix)
            assert queue["Properties"]["SqsManagedSseEnabled"] is True
            default_synth.assertions.has_resource_properties(
                "AWS::SQS::QueuePolicy",
                {
                    "Queues": [{"Ref": queue_id}],
                    "PolicyDocument": {
                        # A queue subscribed to a topic also lets SNS send (test_topic.py).
                        "Statement": Match.array_with(
                            [
                                {
                                    "Effect": "Deny",
                                    "Action": "sqs:*",
                                    "Principal": {"AWS": "*"},
                                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                    "Resource": {"Fn::GetAtt": [queue_id, "Arn"]},
                                }
                            ]
                        )
                    },
                },
            )

    @pytest.mark.parametrize("cid", CONSUMER_IDS)
    def test_dead_letter_queue(self, default_synth: Synth, cid: str) -> None:
        dlq_id, dlq = default_synth.resource("AWS::SQS::Queue", f"{cid}DeadLetterQueue")
        queue = default_synth.props("AWS::SQS::Queue", f"{cid}Queue")
        assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 86_400
        assert queue["RedrivePolicy"] == {
            "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
            "maxReceiveCount": 5,
        }
        allow = dlq["Properties"]["RedriveAllowPolicy"]
        assert allow["redrivePermission"] == "byQueue"
        (source_arn,) = allow["sourceQueueArns"]
        assert source_arn["Fn::Join"][1][-1] == f":{queue['QueueName']}"

    def test_fifo_only_for_payments(self, default_synth: Synth) -> None:
        for prefix in ("PaymentsQueue", "PaymentsDeadLetterQueue"):
            props = default_synth.props("AWS::SQS::Queue", prefix)
            assert props["FifoQueue"] is True
            assert props["ContentBasedDeduplication"] is False
            assert props["QueueName"].endswith(".fifo")
        for prefix in ("OrdersQueue", "OrdersDeadLetterQueue"):
            assert "FifoQueue" not in default_synth.props("AWS::SQS::Queue", prefix)

    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_visibility_is_six_timeouts_plus_window(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        synth: Synth = request.getfixturevalue(fixture)
        for cid in CONSUMER_IDS:
            timeout = synth.props("AWS::Lambda::Function", f"{cid}Function")["Timeout"]
            mapping = synth.props("AWS::Lambda::EventSourceMapping", cid)
            window = mapping.get("MaximumBatchingWindowInSeconds", 0)
            visibility = synth.props("AWS::SQS::Queue", f"{cid}Queue")["VisibilityTimeout"]
            assert visibility >= 6 * timeout + window
            assert visibility == 6 * timeout + window  # and no more: redelivery stays prompt

    def test_variant_values_reach_the_template(self, variant_synth: Synth) -> None:
        orders = variant_synth.props("AWS::SQS::Queue", "OrdersQueue")
        payments = variant_synth.props("AWS::SQS::Queue", "PaymentsQueue")
        assert orders["VisibilityTimeout"] == 6 * 20 + 5
        assert payments["VisibilityTimeout"] == 6 * 20  # FIFO has no batching window
        assert orders["RedrivePolicy"]["maxReceiveCount"] == 3  # per-consumer override
        assert payments["RedrivePolicy"]["maxReceiveCount"] == 5
        assert orders["QueueName"] == "ExactlyOnceVariant-prod-Orders"  # the prod stack's name


class TestEventSourceMappings:
    def test_orders_mapping(self, default_synth: Synth) -> None:
        function_id, _ = default_synth.resource("AWS::Lambda::Function", "OrdersFunction")
        queue_id, _ = default_synth.resource("AWS::SQS::Queue", "OrdersQueue")
        default_synth.assertions.has_resource_properties(
            "AWS::Lambda::EventSourceMapping",
            {
                "FunctionName": {"Ref": function_id},
                "EventSourceArn": {"Fn::GetAtt": [queue_id, "Arn"]},
                "Enabled": True,
                "BatchSize": 10,
                "MaximumBatchingWindowInSeconds": 0,
                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                "ScalingConfig": {"MaximumConcurrency": 5},
                "MetricsConfig": {"Metrics": ["EventCount"]},
            },
        )

    def test_fifo_mapping_has_no_batching_window(self, default_synth: Synth) -> None:
        props = default_synth.props("AWS::Lambda::EventSourceMapping", "Payments")
        assert "MaximumBatchingWindowInSeconds" not in props
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert props["BatchSize"] == 10

    def test_variant_tuning(self, variant_synth: Synth) -> None:
        orders = variant_synth.props("AWS::Lambda::EventSourceMapping", "Orders")
        assert (orders["BatchSize"], orders["MaximumBatchingWindowInSeconds"]) == (50, 5)
        assert orders["ScalingConfig"] == {"MaximumConcurrency": 20}

    def test_mapping_waits_for_the_role_policy(self, default_synth: Synth) -> None:
        _, mapping = default_synth.resource("AWS::Lambda::EventSourceMapping", "Orders")
        policy_id, _ = default_synth.resource("AWS::IAM::Policy", "OrdersFunctionRole")
        assert policy_id in mapping["DependsOn"]


class TestTables:
    def test_idempotency_table(self, default_synth: Synth) -> None:
        default_synth.assertions.has_resource(
            "AWS::DynamoDB::Table",
            {
                "DeletionPolicy": "Delete",
                "Properties": {
                    "BillingMode": "PAY_PER_REQUEST",
                    "KeySchema": [{"AttributeName": schema.PARTITION_KEY, "KeyType": "HASH"}],
                    "AttributeDefinitions": Match.array_with(
                        [{"AttributeName": schema.PARTITION_KEY, "AttributeType": "S"}]
                    ),
                    "TimeToLiveSpecification": {"AttributeName": schema.TTL, "Enabled": True},
                    "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                    "SSESpecification": {"SSEEnabled": True},
                    "DeletionProtectionEnabled": False,
                    "GlobalSecondaryIndexes": [
                        {
                            "IndexName": schema.PENDING_INDEX,
                            "KeySchema": [
                                {"AttributeName": schema.PENDING_SHARD, "KeyType": "HASH"},
                                {"AttributeName": schema.PENDING_AT, "KeyType": "RANGE"},
                            ],
                            "Projection": {"ProjectionType": "ALL"},
                        }
                    ],
                },
            },
        )
        props = default_synth.props("AWS::DynamoDB::Table", "TablesIdempotency")
        assert sorted(map(tuple, (a.values() for a in props["AttributeDefinitions"]))) == sorted(
            [(schema.PARTITION_KEY, "S"), (schema.PENDING_SHARD, "S"), (schema.PENDING_AT, "N")]
        )

    def test_ledger_table(self, default_synth: Synth) -> None:
        props = default_synth.props("AWS::DynamoDB::Table", "TablesLedger")
        assert props["KeySchema"] == [
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ]
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert props["SSESpecification"] == {"SSEEnabled": True}
        # exactly_once.ledger writes the attribute (LEDGER_RETENTION_DAYS, 365 by default)
        assert props["TimeToLiveSpecification"] == {
            "AttributeName": ledger.TTL_ATTRIBUTE,
            "Enabled": True,
        }

    def test_prod_keeps_tables(self, variant_synth: Synth) -> None:
        for prefix in ("TablesIdempotency", "TablesLedger"):
            _, table = variant_synth.resource("AWS::DynamoDB::Table", prefix)
            assert (table["DeletionPolicy"], table["UpdateReplacePolicy"]) == ("Retain", "Retain")
            assert table["Properties"]["DeletionProtectionEnabled"] is True

    def test_direct_table_helper_mirrors_the_template(self, default_synth: Synth) -> None:
        """tools/tables.py builds DynamoDB Local tables for tests and `make run`: no drift."""
        from local_aws.tables import create_idempotency_table, create_ledger_table

        calls: dict[str, dict[str, Any]] = {}

        class Recorder:
            def create_table(self, **kwargs: Any) -> None:
                calls[kwargs["TableName"]] = kwargs

            def get_waiter(self, name: str) -> Any:
                return type("W", (), {"wait": lambda *_a, **_k: None})()

        create_idempotency_table(Recorder(), "idem")  # type: ignore[arg-type]
        create_ledger_table(Recorder(), "ledger")  # type: ignore[arg-type]
        for name, prefix in (("idem", "TablesIdempotency"), ("ledger", "TablesLedger")):
            props = default_synth.props("AWS::DynamoDB::Table", prefix)
            for key in ("KeySchema", "BillingMode"):
                assert calls[name][key] == props[key]
            assert sorted(calls[name]["AttributeDefinitions"], key=str) == sorted(
                props["AttributeDefinitions"], key=str
            )
            assert calls[name].get("GlobalSecondaryIndexes") == props.get("GlobalSecondaryIndexes")


class TestLayerAndFunctions:
    def test_layer(self, default_synth: Synth) -> None:
        props = default_synth.props("AWS::Lambda::LayerVersion", "SharedLayer")
        assert props["CompatibleRuntimes"] == ["python3.13"]
        assert props["CompatibleArchitectures"] == ["arm64"]

    def test_every_function(self, default_synth: Synth) -> None:
        layer_id, _ = default_synth.resource("AWS::Lambda::LayerVersion", "SharedLayer")
        functions = default_synth.resources("AWS::Lambda::Function")
        assert len(functions) == (
            len(CONSUMERS) + len(APIS) + len(SUBSCRIBERS) + len(STREAMS) + 1  # + monitor
        )
        for logical_id, function in functions.items():
            props = function["Properties"]
            assert props["Runtime"] == "python3.13", logical_id
            assert props["Architectures"] == ["arm64"]
            assert props["Layers"] == [{"Ref": layer_id}]
            assert props["Handler"] == "handler.handle"
            assert props["LoggingConfig"]["LogFormat"] == "JSON"
            log_group = default_synth.template["Resources"][
                ref_id(props["LoggingConfig"]["LogGroup"])
            ]
            assert log_group["Type"] == "AWS::Logs::LogGroup"
            assert log_group["Properties"]["RetentionInDays"] == 30
            assert "TracingConfig" not in props  # X-Ray only when asked for

    def test_xray_and_retention_from_context(self, variant_synth: Synth) -> None:
        for function in variant_synth.resources("AWS::Lambda::Function").values():
            assert function["Properties"]["TracingConfig"] == {"Mode": "Active"}
        for log_group in variant_synth.resources("AWS::Logs::LogGroup").values():
            assert log_group["Properties"]["RetentionInDays"] == 90
            assert log_group["DeletionPolicy"] == "Retain"

    @pytest.mark.parametrize(
        ("cid", "scope", "block", "envelope"),
        [
            ("Orders", "orders", "false", {"SNS_ENVELOPE": "auto"}),
            ("Payments", "payments", "true", {}),
        ],
    )
    def test_consumer_environment(
        self, default_synth: Synth, cid: str, scope: str, block: str, envelope: dict[str, str]
    ) -> None:
        """`envelope`: a queue subscribed to a topic unwraps SNS envelopes (infra/topics.py)."""
        env = default_synth.props("AWS::Lambda::Function", f"{cid}Function")["Environment"]
        variables = env["Variables"]
        idem_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")
        ledger_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesLedger")
        dlq_id, _ = default_synth.resource("AWS::SQS::Queue", f"{cid}DeadLetterQueue")
        assert variables == {
            "IDEMPOTENCY_TABLE": {"Ref": idem_id},
            "LEDGER_TABLE": {"Ref": ledger_id},
            "DEAD_LETTER_QUEUE_URL": {"Ref": dlq_id},
            "CONSUMER_SCOPE": scope,
            "POWERTOOLS_SERVICE_NAME": scope,
            "POWERTOOLS_METRICS_NAMESPACE": "ExactlyOnce",
            "LEASE_MARGIN_MS": "5000",
            "BLOCK_EXPIRED_LEASES": block,
            **envelope,
        }


class TestLeastPrivilege:
    def test_no_wildcard_actions_in_any_allow(
        self, default_synth: Synth, variant_synth: Synth
    ) -> None:
        """Deny statements may be broad (deny all non-TLS traffic); allows never use `*`.

        The one exception is each key's default admin statement (account root, kms:*), which
        AWS requires so that the key can never become unmanageable (the alarm and topic keys).
        """
        for synth in (default_synth, variant_synth):
            key_ids = set(synth.resources("AWS::KMS::Key"))
            assert len(key_ids) == 1 + len(TOPICS)
            for owner, statement in statements(synth):
                if statement["Effect"] != "Allow":
                    continue
                wild = [a for a in actions(statement) if "*" in a]
                if owner in key_ids and wild == ["kms:*"]:
                    root = statement["Principal"]["AWS"]  # literal once prod names its account
                    assert (root if isinstance(root, str) else root["Fn::Join"][1][-1]).endswith(
                        ":root"
                    )
                    continue
                assert not wild, (owner, statement)

    def test_roles_have_no_managed_policies(self, default_synth: Synth) -> None:
        for role in default_synth.resources("AWS::IAM::Role").values():
            assert "ManagedPolicyArns" not in role["Properties"]
            assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {
                "Service": "lambda.amazonaws.com"
            }

    @pytest.mark.parametrize("cid", CONSUMER_IDS)
    def test_consumer_role(self, default_synth: Synth, cid: str) -> None:
        resource_ids = {
            name: default_synth.resource(type_, f"{prefix}")[0]
            for name, type_, prefix in (
                ("idem", "AWS::DynamoDB::Table", "TablesIdempotency"),
                ("ledger", "AWS::DynamoDB::Table", "TablesLedger"),
                ("queue", "AWS::SQS::Queue", f"{cid}Queue"),
                ("dlq", "AWS::SQS::Queue", f"{cid}DeadLetterQueue"),
                ("logs", "AWS::Logs::LogGroup", f"{cid}FunctionLogs"),
            )
        }
        by_sid = role_statements(default_synth, f"{cid}FunctionRole")
        expected = {
            "WriteOwnLogs": (["logs:CreateLogStream", "logs:PutLogEvents"], "logs"),
            # No DeleteItem: nothing deletes a record (test_record_actions.py derives the set).
            "IdempotencyRecords": (sorted(RECORD_ACTIONS), "idem"),
            # A batch's PartiQL INSERTs and UPDATEs: the consumer alone batches.
            "IdempotencyBatches": (sorted(BATCH_ACTIONS), "idem"),
            "LedgerAppend": (["dynamodb:PutItem"], "ledger"),
            "ConsumeSourceQueue": (
                [
                    "sqs:ChangeMessageVisibility",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                    "sqs:ReceiveMessage",
                ],
                "queue",
            ),
            "SendPermanentFailuresToDeadLetterQueue": (["sqs:SendMessage"], "dlq"),
        }
        assert set(by_sid) == set(expected)
        for sid, (wanted_actions, resource) in expected.items():
            statement = by_sid[sid]
            assert sorted(actions(statement)) == wanted_actions, sid
            assert ref_id(statement["Resource"]) == resource_ids[resource], sid

    def test_lock_monitor_may_only_query_the_index(self, default_synth: Synth) -> None:
        by_sid = role_statements(default_synth, "LockMonitorFunctionRole")
        assert set(by_sid) == {"WriteOwnLogs", "ReadPendingIndex"}
        query = by_sid["ReadPendingIndex"]
        assert actions(query) == ["dynamodb:Query"]
        idem_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")
        parts = query["Resource"]["Fn::Join"][1]
        assert parts == [{"Fn::GetAtt": [idem_id, "Arn"]}, f"/index/{schema.PENDING_INDEX}"]

    def test_xray_adds_only_xray_actions(self, variant_synth: Synth) -> None:
        """With tracing the only `Resource: *` grants are X-Ray's (what nag acknowledges)."""
        policies = variant_synth.resources("AWS::IAM::Policy")
        for logical_id, policy in policies.items():
            document = policy["Properties"]["PolicyDocument"]["Statement"]
            unscoped = [s for s in document if s["Resource"] == "*"]
            assert unscoped, logical_id
            for statement in unscoped:
                assert all(a.startswith("xray:") for a in actions(statement)), statement


class TestAlarms:
    def alarms_by_metric(self, synth: Synth) -> dict[str, list[dict[str, Any]]]:
        """By metric name, or by the expression of a metric-math alarm."""
        found: dict[str, list[dict[str, Any]]] = {}
        for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
            props = alarm["Properties"]
            expressions = [m["Expression"] for m in props.get("Metrics", []) if "Expression" in m]
            name = props.get("MetricName") or expressions[0]
            found.setdefault(name, []).append(props)
        return found

    def test_every_alarm_notifies_the_topic(self, default_synth: Synth) -> None:
        topic_id, _ = default_synth.resource("AWS::SNS::Topic", "AlarmsTopic")
        alarms = default_synth.resources("AWS::CloudWatch::Alarm")
        assert len(alarms) == (
            CONSUMER_ALARMS * len(CONSUMERS)
            + API_ALARMS * len(APIS)
            + TOPIC_ALARMS * len(TOPICS)
            + SUBSCRIBER_ALARMS * len(SUBSCRIBERS)
            + STREAM_ALARMS * len(STREAMS)
            + STACK_ALARMS
        )
        for alarm in alarms.values():
            props = alarm["Properties"]
            assert props["AlarmActions"] == [{"Ref": topic_id}]
            assert props["OKActions"] == [{"Ref": topic_id}]
            assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"

    @pytest.mark.parametrize("cid", CONSUMER_IDS)
    def test_queue_and_function_alarms(self, default_synth: Synth, cid: str) -> None:
        queue = default_synth.props("AWS::SQS::Queue", f"{cid}Queue")["QueueName"]
        dlq = default_synth.props("AWS::SQS::Queue", f"{cid}DeadLetterQueue")["QueueName"]
        function_id, _ = default_synth.resource("AWS::Lambda::Function", f"{cid}Function")

        def on(metric: str, dimension: Any, threshold: float) -> None:
            matching = [
                a
                for a in self.alarms_by_metric(default_synth).get(metric, [])
                if dimension in [d["Value"] for d in a["Dimensions"]]
            ]
            assert len(matching) == 1, (metric, dimension)
            assert matching[0]["Threshold"] == threshold

        on(
            "ApproximateNumberOfMessagesVisible",
            {"Fn::GetAtt": [ref_queue(default_synth, dlq), "QueueName"]},
            1,
        )
        on(
            "ApproximateAgeOfOldestMessage",
            {"Fn::GetAtt": [ref_queue(default_synth, dlq), "QueueName"]},
            259_200,
        )
        on(
            "ApproximateAgeOfOldestMessage",
            {"Fn::GetAtt": [ref_queue(default_synth, queue), "QueueName"]},
            600,
        )
        on("Errors", {"Ref": function_id}, 1)
        on("Throttles", {"Ref": function_id}, 1)

    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_table_and_pending_index_throttle_alarms(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        """Each table's own throttles, and the pending index's (dimension
        GlobalSecondaryIndexName) on the idempotency table, sustained over 2 of 3 periods."""
        synth: Synth = request.getfixturevalue(fixture)
        watched: set[tuple[str, str | None]] = set()
        for alarm in self.alarms_by_metric(synth)["FILL(reads, 0) + FILL(writes, 0)"]:
            metrics = {m["Id"]: m for m in alarm["Metrics"]}
            assert {
                metrics["reads"]["MetricStat"]["Metric"]["MetricName"],
                metrics["writes"]["MetricStat"]["Metric"]["MetricName"],
            } == {"ReadThrottleEvents", "WriteThrottleEvents"}
            dimensions = {
                d["Name"]: d["Value"]
                for d in metrics["reads"]["MetricStat"]["Metric"]["Dimensions"]
            }
            watched.add(
                (ref_id(dimensions["TableName"]), dimensions.get("GlobalSecondaryIndexName"))
            )
            assert alarm["Threshold"] == 1
            assert evaluation(alarm) == SUSTAINED
        idem_id, _ = synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")
        tables = {(table_id, None) for table_id in synth.resources("AWS::DynamoDB::Table")}
        assert watched == tables | {(idem_id, schema.PENDING_INDEX)}

    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_transaction_conflicts_alarm(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        synth: Synth = request.getfixturevalue(fixture)
        (alarm,) = self.alarms_by_metric(synth)["TransactionConflict"]
        idem_id, _ = synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")
        assert alarm["Namespace"] == "AWS/DynamoDB"
        assert alarm["Dimensions"] == [{"Name": "TableName", "Value": {"Ref": idem_id}}]
        assert (alarm["Statistic"], alarm["Threshold"]) == ("Sum", 1)
        assert evaluation(alarm) == SUSTAINED

    @pytest.mark.parametrize("metric", ["StuckLocks", "OverdueWork"])
    def test_monitor_alarms_match_what_the_monitor_emits(
        self, default_synth: Synth, metric: str
    ) -> None:
        (alarm,) = self.alarms_by_metric(default_synth)[metric]
        assert alarm["Namespace"] == "ExactlyOnce"
        assert alarm["Dimensions"] == [{"Name": "service", "Value": "lock_monitor"}]
        assert alarm["Threshold"] == 1
        assert evaluation(alarm) == HEARTBEAT
        env = default_synth.props("AWS::Lambda::Function", "LockMonitorFunction")["Environment"]
        assert env["Variables"]["POWERTOOLS_SERVICE_NAME"] == "lock_monitor"
        assert env["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == "ExactlyOnce"

    def test_topic_is_encrypted_and_ssl_only(self, default_synth: Synth) -> None:
        key_id, key = default_synth.resource("AWS::KMS::Key", "AlarmsKey")
        topic_id, topic = default_synth.resource("AWS::SNS::Topic", "AlarmsTopic")
        assert key["Properties"]["EnableKeyRotation"] is True
        assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        (policy,) = [
            p
            for p in default_synth.resources("AWS::SNS::TopicPolicy").values()
            if p["Properties"]["Topics"] == [{"Ref": topic_id}]
        ]
        document = policy["Properties"]["PolicyDocument"]["Statement"]
        deny = [s for s in document if s["Effect"] == "Deny"]
        assert len(deny) == 1
        assert deny[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        publish = [s for s in document if s.get("Sid") == "AllowCloudWatchAlarmsToPublish"]
        assert publish[0]["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
        key_statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
        assert actions(key_statements["AllowCloudWatchAlarmsToPublish"]) == [
            "kms:Decrypt",
            "kms:GenerateDataKey",
        ]
        subscribed = [
            s["Properties"]["TopicArn"]
            for s in default_synth.resources("AWS::SNS::Subscription").values()
        ]
        assert {"Ref": topic_id} not in subscribed  # no email without alarmEmail

    def test_alarm_email_subscribes(self, variant_synth: Synth) -> None:
        variant_synth.assertions.has_resource_properties(
            "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
        )


def ref_queue(synth: Synth, queue_name: str) -> str:
    (logical_id,) = [
        k
        for k, v in synth.resources("AWS::SQS::Queue").items()
        if v["Properties"].get("QueueName") == queue_name
    ]
    return logical_id


class TestMonitorDashboardOutputs:
    def test_monitor_runs_on_a_schedule(self, default_synth: Synth) -> None:
        function_id, _ = default_synth.resource("AWS::Lambda::Function", "LockMonitorFunction")
        rule = default_synth.props("AWS::Events::Rule", "LockMonitorSchedule")
        assert rule["ScheduleExpression"] == "rate(5 minutes)"
        assert rule["Targets"][0]["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}
        default_synth.assertions.has_resource_properties(
            "AWS::Lambda::Permission",
            {"Principal": "events.amazonaws.com", "Action": "lambda:InvokeFunction"},
        )

    def test_dashboard(self, default_synth: Synth) -> None:
        (dashboard,) = default_synth.resources("AWS::CloudWatch::Dashboard").values()
        body = str(dashboard["Properties"]["DashboardBody"])
        for title in (
            "Orders queue",
            "Payments dead-letter queue",
            "Stuck locks",
            "DynamoDB throttle",
            *(f"{topic.id} topic" for topic in TOPICS),
            *(f"{sub.id} asynchronous invocations" for sub in SUBSCRIBERS),
            *(f"{sub.id} dead-letter queue" for sub in SUBSCRIBERS),
            *(
                f"{entry_id} started minus finished"
                for entry_id in (*CONSUMER_IDS, *(a.id for a in APIS), *(s.id for s in SUBSCRIBERS))
            ),
        ):
            assert title in body, title

    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_outputs(self, fixture: str, request: pytest.FixtureRequest) -> None:
        synth: Synth = request.getfixturevalue(fixture)
        assert set(synth.template["Outputs"]) == OUTPUTS

    def test_stack_name_from_context(self, default_synth: Synth, variant_synth: Synth) -> None:
        assert default_synth.stack.stack_name == "ExactlyOnceSqs"
        assert variant_synth.stack.stack_name == "ExactlyOnceVariant-prod"


def evaluation(alarm: dict[str, Any]) -> Evaluation:
    return Evaluation(alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"])


def alarm_kind(logical_id: str) -> Evaluation:
    """What each alarm should evaluate, by its construct id: a single event is real for dead
    letters, lost deliveries and lost locks; the monitor's are a heartbeat; the rest sustained."""
    if any(
        kind in logical_id
        for kind in (
            "DeadLetterQueueNotEmptyAlarm",
            "DeadLetterQueueAgeAlarm",
            "OnFailureQueueNotEmptyAlarm",
            "DestinationDeliveryFailuresAlarm",
            "DeliveryFailuresAlarm",
            "UnfinishedWorkAlarm",
        )
    ):
        return ONE_EVENT
    if logical_id.startswith("LockMonitor"):
        return HEARTBEAT
    return SUSTAINED


class TestAlarmEvaluation:
    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_every_alarm_evaluates_as_its_kind(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        synth: Synth = request.getfixturevalue(fixture)
        kinds: dict[Evaluation, int] = {}
        for logical_id, alarm in synth.resources("AWS::CloudWatch::Alarm").items():
            wanted = alarm_kind(logical_id)
            assert evaluation(alarm["Properties"]) == wanted, logical_id
            kinds[wanted] = kinds.get(wanted, 0) + 1
        assert set(kinds) == {ONE_EVENT, SUSTAINED, HEARTBEAT}  # every kind is in use

    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_stuck_locks_is_a_heartbeat(self, fixture: str, request: pytest.FixtureRequest) -> None:
        """No StuckLocks datapoint means the monitor did not run: that breaches. Two periods,
        each at least the monitor's interval, so one late run does not page."""
        synth: Synth = request.getfixturevalue(fixture)
        _, alarm = synth.resource("AWS::CloudWatch::Alarm", "LockMonitorStuckLocksAlarm")
        props = alarm["Properties"]
        assert props["TreatMissingData"] == "breaching"
        rule = synth.props("AWS::Events::Rule", "LockMonitorSchedule")
        interval_s = int(rule["ScheduleExpression"].removeprefix("rate(").split()[0]) * 60
        assert props["Period"] >= interval_s
        assert props["Period"] * props["EvaluationPeriods"] >= 2 * interval_s
        assert evaluation(props) == Evaluation(2, 2)
        for other in ("LockMonitorOverdueWorkAlarm", "LockMonitorErrorsAlarm"):
            _, alarm = synth.resource("AWS::CloudWatch::Alarm", other)
            assert alarm["Properties"]["TreatMissingData"] == "notBreaching"


def dashboard_widgets(synth: Synth) -> dict[str, dict[str, Any]]:
    """The dashboard's widgets by title: the body's Fn::Join with every Ref as "REF:<id>"."""
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    _, parts = dashboard["Properties"]["DashboardBody"]["Fn::Join"]
    text = "".join(part if isinstance(part, str) else f"REF:{ref_id(part)}" for part in parts)
    widgets = json.loads(text)["widgets"]
    return {
        w["properties"]["title"]: w["properties"] for w in widgets if "title" in w["properties"]
    }


def graphed(metric: list[Any]) -> tuple[str, str, dict[str, str]]:
    """(namespace, name, dimensions) of one dashboard metric array."""
    namespace, name, *rest = (m for m in metric if not isinstance(m, dict))
    return namespace, name, dict(zip(rest[::2], rest[1::2], strict=True))


class TestDashboardMetrics:
    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_event_source_mapping_counts_per_consumer(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        synth: Synth = request.getfixturevalue(fixture)
        widgets = dashboard_widgets(synth)
        for cid in CONSUMER_IDS:
            mapping_id, mapping = synth.resource("AWS::Lambda::EventSourceMapping", cid)
            assert mapping["Properties"]["MetricsConfig"] == {"Metrics": ["EventCount"]}
            metrics = widgets[f"{cid} event source mapping"]["metrics"]
            assert [graphed(m) for m in metrics] == [
                ("AWS/Lambda", name, {"EventSourceMappingUUID": f"REF:{mapping_id}"})
                for name in EVENT_SOURCE_MAPPING_METRICS
            ]
        assert set(EVENT_SOURCE_MAPPING_METRICS) == {
            "PolledEventCount",
            "InvokedEventCount",
            "FailedInvokeEventCount",
            "DeletedEventCount",
            "DroppedEventCount",
        }

    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_outcome_counts_per_consumer_and_subscriber(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        """Namespace and dimensions as the library's EMF documents carry them: the entry
        point's dimension and `service`, both the scope (POWERTOOLS_SERVICE_NAME)."""
        synth: Synth = request.getfixturevalue(fixture)
        widgets = dashboard_widgets(synth)
        entries = [(c.id, "consumer", c.scope) for c in CONSUMERS]
        entries += [(sub.id, "subscriber", sub.scope) for sub in SUBSCRIBERS]
        for name, dimension, scope in entries:
            metrics = widgets[f"{name} outcomes"]["metrics"]
            assert [graphed(m) for m in metrics] == [
                ("ExactlyOnce", metric, {dimension: scope, "service": scope})
                for metric in OUTCOME_METRICS
            ]
            function = synth.props("AWS::Lambda::Function", f"{name}Function")
            assert function["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == scope

    def test_outcome_names_are_what_the_library_emits(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """One batch with every outcome, a takeover and a dead letter: the EMF document the
        library writes names exactly the graphed metrics."""
        monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
        monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "orders")  # as the stack sets it
        results = [RecordResult(f"m{i}", outcome, False) for i, outcome in enumerate(Outcome)]
        results.append(RecordResult("t", Outcome.PROCESSED, False, takeover=True))
        results.append(RecordResult("d", Outcome.PERMANENT, False, dead_lettered=True))
        observability.emit_batch_metrics("orders", results)
        (line,) = [line for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
        (directive,) = json.loads(line)["_aws"]["CloudWatchMetrics"]
        assert {m["Name"] for m in directive["Metrics"]} == set(OUTCOME_METRICS)
        assert directive["Dimensions"] == [["consumer", "service"]]

    def test_pending_index_and_conflicts_are_graphed(self, default_synth: Synth) -> None:
        idem_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")
        widget = dashboard_widgets(default_synth)[
            "Idempotency pending index throttles and transaction conflicts"
        ]
        table = {"TableName": f"REF:{idem_id}"}
        index = {**table, "GlobalSecondaryIndexName": schema.PENDING_INDEX}
        assert [graphed(m) for m in widget["metrics"]] == [
            ("AWS/DynamoDB", "ReadThrottleEvents", index),
            ("AWS/DynamoDB", "WriteThrottleEvents", index),
            ("AWS/DynamoDB", "TransactionConflict", table),
        ]
