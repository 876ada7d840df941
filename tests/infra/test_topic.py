"""The Sales topic and its subscribers in the repo's stack (the orders queue through an SQS
subscription, SalesCounter directly), the local stack's variant for moto, the started-minus-
finished alarm of every entry point, and the two constructs on their own."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from exactly_once_cdk import (
    IdempotencyTable,
    IdempotentConsumer,
    IdempotentSubscriber,
    IdempotentTopic,
    LedgerTable,
)
from exactly_once_cdk.unfinished_work import EXPRESSION, UnfinishedWork
from infra.apis import APIS
from infra.consumers import CONSUMERS
from infra.consumers import by_id as consumer_by_id
from infra.streams import STREAMS
from infra.topics import ROOT, TOPICS, by_id, subscriber_by_id
from tests.infra.conftest import Synth
from tests.infra.test_nag_and_lint import nag_violations
from tests.infra.test_template import actions, ref_id, role_statements

TOPIC = "Sales"
SUBSCRIBER = "SalesCounter"
LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:probe:1"
INLINE = lambda_.Code.from_inline("def handle(event, context):\n    return {}\n")
SNS = {"Service": "sns.amazonaws.com"}


def resources(template: Mapping[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def queue_policy_statements(synth: Synth, queue_id: str) -> list[dict[str, Any]]:
    (policy,) = [
        p
        for p in synth.resources("AWS::SQS::QueuePolicy").values()
        if p["Properties"]["Queues"] == [{"Ref": queue_id}]
    ]
    return list(policy["Properties"]["PolicyDocument"]["Statement"])


def sns_may_send(statements: list[dict[str, Any]], queue_id: str, topic_id: str) -> bool:
    """The one statement SNS needs on a queue, scoped to one topic."""
    return {
        "Effect": "Allow",
        "Action": "sqs:SendMessage",
        "Principal": SNS,
        "Resource": {"Fn::GetAtt": [queue_id, "Arn"]},
        "Condition": {"ArnEquals": {"aws:SourceArn": {"Ref": topic_id}}},
    } in statements


def unfinished_alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    """Started-minus-finished alarms by the scope their metrics are dimensioned on."""
    found: dict[str, dict[str, Any]] = {}
    for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
        metrics = {m["Id"]: m for m in alarm["Properties"].get("Metrics", [])}
        if "started" not in metrics:
            continue
        (dimension,) = metrics["started"]["MetricStat"]["Metric"]["Dimensions"]
        assert dimension["Name"] == "scope"
        assert dimension["Value"] not in found, dimension
        found[dimension["Value"]] = alarm["Properties"]
    return found


def probe_stack(app: App | None = None) -> tuple[Stack, IdempotencyTable, lambda_.ILayerVersion]:
    stack = Stack(app or App(), "Probe")
    table = IdempotencyTable(stack, "Idempotency")
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN)
    return stack, table, layer


class TestRegistry:
    def test_sales_fans_out_to_orders_and_the_counter(self) -> None:
        spec = by_id(TOPIC)
        assert [t.id for t in TOPICS] == [TOPIC]
        assert (spec.queues, spec.raw_delivery) == (("Orders",), False)
        assert [s.id for s in spec.subscribers] == [SUBSCRIBER]
        counter = subscriber_by_id(SUBSCRIBER)
        assert (counter.scope, counter.handler, counter.retry_attempts) == (
            "sales",
            "handler.handle",
            2,
        )
        assert (counter.source_path / "handler.py").is_file()
        with pytest.raises(KeyError, match="Nope"):
            by_id("Nope")
        with pytest.raises(KeyError, match="Nope"):
            subscriber_by_id("Nope")

    def test_queues_are_standard_consumers_and_names_do_not_collide(self) -> None:
        for topic in TOPICS:
            for consumer_id in topic.queues:
                assert not consumer_by_id(consumer_id).fifo  # standard topics, standard queues
        ids = [
            *(c.id for c in CONSUMERS),
            *(a.id for a in APIS),
            *(t.id for t in TOPICS),
            *(s.id for t in TOPICS for s in t.subscribers),
        ]
        assert len(ids) == len(set(ids))  # they prefix the stack's outputs
        scopes = [
            *(c.scope for c in CONSUMERS),
            *(a.scope for a in APIS),
            *(s.scope for t in TOPICS for s in t.subscribers),
        ]
        assert len(scopes) == len(set(scopes))  # they prefix record ids

    def test_registry_imports_without_cdk(self) -> None:
        """The local stack imports it; it must not need (or pay for) jsii."""
        code = (
            "import sys, infra.topics; print('aws_cdk' in sys.modules, 'constructs' in sys.modules)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "False False"


class TestTopic:
    def test_encrypted_under_its_own_rotated_key(self, default_synth: Synth) -> None:
        key_id, key = default_synth.resource("AWS::KMS::Key", f"{TOPIC}Key")
        _, topic = default_synth.resource("AWS::SNS::Topic", f"{TOPIC}Topic")
        assert key["Properties"]["EnableKeyRotation"] is True
        assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        # Only the account's admin statement: publishers get the key through IAM
        # (IdempotentTopic.grant_publish), no service principal is let in.
        (statement,) = key["Properties"]["KeyPolicy"]["Statement"]
        assert actions(statement) == ["kms:*"]
        assert statement["Principal"]["AWS"]["Fn::Join"][1][-1] == ":root"
        assert key["DeletionPolicy"] == "Delete"  # a dev stage

    def test_prod_keeps_the_key(self, variant_synth: Synth) -> None:
        _, key = variant_synth.resource("AWS::KMS::Key", f"{TOPIC}Key")
        assert (key["DeletionPolicy"], key["UpdateReplacePolicy"]) == ("Retain", "Retain")

    def test_refuses_requests_without_tls_and_allows_nothing(self, default_synth: Synth) -> None:
        topic_id, _ = default_synth.resource("AWS::SNS::Topic", f"{TOPIC}Topic")
        (policy,) = [
            p
            for p in default_synth.resources("AWS::SNS::TopicPolicy").values()
            if p["Properties"]["Topics"] == [{"Ref": topic_id}]
        ]
        (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        assert deny["Principal"] == "*"

    def test_orders_queue_subscribes_through_sqs(self, default_synth: Synth) -> None:
        topic_id, _ = default_synth.resource("AWS::SNS::Topic", f"{TOPIC}Topic")
        queue_id, _ = default_synth.resource("AWS::SQS::Queue", "OrdersQueue")
        (_, subscription), *others = [
            (k, v)
            for k, v in default_synth.resources("AWS::SNS::Subscription").items()
            if v["Properties"]["Protocol"] == "sqs"
        ]
        assert not others
        assert subscription["Properties"] == {
            "Endpoint": {"Fn::GetAtt": [queue_id, "Arn"]},
            "Protocol": "sqs",
            "RawMessageDelivery": False,  # the envelope: the consumer unwraps it
            "TopicArn": {"Ref": topic_id},
        }
        statements = queue_policy_statements(default_synth, queue_id)
        assert sns_may_send(statements, queue_id, topic_id)
        # SNS may send once the policy says so; the queue is SSE-SQS, so no key is involved.
        policy_id, _ = default_synth.resource("AWS::SQS::QueuePolicy", "OrdersQueuePolicy")
        assert subscription["DependsOn"] == [policy_id]
        assert default_synth.props("AWS::SQS::Queue", "OrdersQueue")["SqsManagedSseEnabled"]

    def test_a_subscribed_queues_consumer_unwraps_envelopes(self, default_synth: Synth) -> None:
        """The library's default is off; the construct turns it on where SNS delivers."""
        orders = default_synth.props("AWS::Lambda::Function", "OrdersFunction")
        payments = default_synth.props("AWS::Lambda::Function", "PaymentsFunction")
        assert orders["Environment"]["Variables"]["SNS_ENVELOPE"] == "auto"
        assert "SNS_ENVELOPE" not in payments["Environment"]["Variables"]

    def test_no_other_queue_is_subscribed(self, default_synth: Synth) -> None:
        queue_id, _ = default_synth.resource("AWS::SQS::Queue", "PaymentsQueue")
        assert len(queue_policy_statements(default_synth, queue_id)) == 1  # the TLS deny

    def test_delivery_failure_alarm(self, default_synth: Synth) -> None:
        topic_id, _ = default_synth.resource("AWS::SNS::Topic", f"{TOPIC}Topic")
        alarms_topic, _ = default_synth.resource("AWS::SNS::Topic", "AlarmsTopic")
        alarm = default_synth.props("AWS::CloudWatch::Alarm", f"{TOPIC}DeliveryFailuresAlarm")
        assert (alarm["Namespace"], alarm["MetricName"]) == (
            "AWS/SNS",
            "NumberOfNotificationsFailed",
        )
        assert alarm["Dimensions"] == [
            {"Name": "TopicName", "Value": {"Fn::GetAtt": [topic_id, "TopicName"]}}
        ]
        assert (alarm["Threshold"], alarm["Statistic"]) == (1, "Sum")
        assert alarm["AlarmActions"] == [{"Ref": alarms_topic}]

    def test_output(self, default_synth: Synth) -> None:
        topic_id, _ = default_synth.resource("AWS::SNS::Topic", f"{TOPIC}Topic")
        assert default_synth.template["Outputs"][f"{TOPIC}TopicArn"]["Value"] == {"Ref": topic_id}


class TestSubscriber:
    def ids(self, synth: Synth) -> dict[str, str]:
        return {
            "topic": synth.resource("AWS::SNS::Topic", f"{TOPIC}Topic")[0],
            "function": synth.resource("AWS::Lambda::Function", f"{SUBSCRIBER}Function")[0],
            "dlq": synth.resource("AWS::SQS::Queue", f"{SUBSCRIBER}DeadLetterQueue")[0],
            "role": synth.resource("AWS::IAM::Role", f"{SUBSCRIBER}FunctionRole")[0],
            "policy": synth.resource("AWS::IAM::Policy", f"{SUBSCRIBER}FunctionRole")[0],
            "idem": synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")[0],
            "ledger": synth.resource("AWS::DynamoDB::Table", "TablesLedger")[0],
            "logs": synth.resource("AWS::Logs::LogGroup", f"{SUBSCRIBER}FunctionLogs")[0],
        }

    def test_subscribed_directly_with_the_dlq_as_redrive_policy(self, default_synth: Synth) -> None:
        ids = self.ids(default_synth)
        (subscription,) = [
            v["Properties"]
            for v in default_synth.resources("AWS::SNS::Subscription").values()
            if v["Properties"]["Protocol"] == "lambda"
        ]
        assert subscription == {
            "Endpoint": {"Fn::GetAtt": [ids["function"], "Arn"]},
            "Protocol": "lambda",
            "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": [ids["dlq"], "Arn"]}},
            "TopicArn": {"Ref": ids["topic"]},
        }

    def test_only_the_topic_may_invoke_the_function(self, default_synth: Synth) -> None:
        ids = self.ids(default_synth)
        (permission,) = [
            p["Properties"]
            for p in default_synth.resources("AWS::Lambda::Permission").values()
            if p["Properties"]["Principal"] == "sns.amazonaws.com"
        ]
        assert permission == {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [ids["function"], "Arn"]},
            "Principal": "sns.amazonaws.com",
            "SourceArn": {"Ref": ids["topic"]},
        }

    def test_dead_letter_queue(self, default_synth: Synth) -> None:
        ids = self.ids(default_synth)
        props = default_synth.props("AWS::SQS::Queue", f"{SUBSCRIBER}DeadLetterQueue")
        assert props["QueueName"] == f"ExactlyOnceSqs-{SUBSCRIBER}-dlq"
        assert props["SqsManagedSseEnabled"] is True
        assert props["MessageRetentionPeriod"] == 14 * 86_400
        assert props["RedriveAllowPolicy"] == {"redrivePermission": "denyAll"}
        assert "RedrivePolicy" not in props
        statements = queue_policy_statements(default_synth, ids["dlq"])
        assert len(statements) == 2
        assert {
            "Effect": "Deny",
            "Action": "sqs:*",
            "Principal": {"AWS": "*"},
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            "Resource": {"Fn::GetAtt": [ids["dlq"], "Arn"]},
        } in statements
        assert sns_may_send(statements, ids["dlq"], ids["topic"])  # the RedrivePolicy's sends

    def test_async_retries_then_the_dlq(self, default_synth: Synth) -> None:
        ids = self.ids(default_synth)
        _, config = default_synth.resource("AWS::Lambda::EventInvokeConfig", SUBSCRIBER)
        assert config["Properties"] == {
            "FunctionName": {"Ref": ids["function"]},
            "Qualifier": "$LATEST",
            "MaximumRetryAttempts": subscriber_by_id(SUBSCRIBER).retry_attempts,
            "MaximumEventAgeInSeconds": 6 * 3600,
            "DestinationConfig": {
                "OnFailure": {"Destination": {"Fn::GetAtt": [ids["dlq"], "Arn"]}}
            },
        }
        # Lambda checks the role may send to the destination when the config is created.
        assert ids["policy"] in config["DependsOn"]

    def test_function(self, default_synth: Synth, variant_synth: Synth) -> None:
        props = default_synth.props("AWS::Lambda::Function", f"{SUBSCRIBER}Function")
        assert (props["Handler"], props["Timeout"], props["MemorySize"]) == (
            "handler.handle",
            30,
            256,
        )
        assert "DeadLetterConfig" not in props  # the on-failure destination instead
        variant = variant_synth.props("AWS::Lambda::Function", f"{SUBSCRIBER}Function")
        assert variant["Timeout"] == 20  # functionTimeoutSeconds, like the consumers'
        assert variant["TracingConfig"] == {"Mode": "Active"}

    def test_environment(self, default_synth: Synth) -> None:
        ids = self.ids(default_synth)
        props = default_synth.props("AWS::Lambda::Function", f"{SUBSCRIBER}Function")
        assert props["Environment"]["Variables"] == {
            "IDEMPOTENCY_TABLE": {"Ref": ids["idem"]},
            "LEDGER_TABLE": {"Ref": ids["ledger"]},
            "DEAD_LETTER_QUEUE_URL": {"Ref": ids["dlq"]},
            "SUBSCRIBER_SCOPE": "sales",
            "POWERTOOLS_SERVICE_NAME": "sales",
            "POWERTOOLS_METRICS_NAMESPACE": "ExactlyOnce",
            "LEASE_MARGIN_MS": "5000",
            "BLOCK_EXPIRED_LEASES": "false",
        }

    def test_role_is_least_privilege(self, default_synth: Synth) -> None:
        """Records, the ledger, its own logs, and one send right on its DLQ, which serves the
        handler's permanent failures and Lambda's on-failure destination (sent with this role).
        Nothing on the topic or its key: SNS decrypts before it invokes."""
        ids = self.ids(default_synth)
        by_sid = role_statements(default_synth, f"{SUBSCRIBER}FunctionRole")
        expected = {
            "WriteOwnLogs": (["logs:CreateLogStream", "logs:PutLogEvents"], "logs"),
            "IdempotencyRecords": (
                [
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                ],
                "idem",
            ),
            "LedgerAppend": (["dynamodb:PutItem"], "ledger"),
            "SendFailuresToDeadLetterQueue": (["sqs:SendMessage"], "dlq"),
        }
        assert set(by_sid) == set(expected)
        for sid, (wanted, resource) in expected.items():
            assert sorted(actions(by_sid[sid])) == wanted, sid
            assert ref_id(by_sid[sid]["Resource"]) == ids[resource], sid

    def test_alarms(self, default_synth: Synth) -> None:
        ids = self.ids(default_synth)
        alarms_topic, _ = default_synth.resource("AWS::SNS::Topic", "AlarmsTopic")
        alarms = {
            k: v["Properties"]
            for k, v in default_synth.resources("AWS::CloudWatch::Alarm").items()
            if k.startswith(SUBSCRIBER)
        }
        dlq_name = {"Fn::GetAtt": [ids["dlq"], "QueueName"]}
        function = {"Ref": ids["function"]}
        found = {
            (a["Namespace"], a["MetricName"], a["Dimensions"][0]["Value"] == dlq_name): a
            for a in alarms.values()
            if "MetricName" in a
        }
        assert {(ns, metric): a["Threshold"] for (ns, metric, _), a in found.items()} == {
            ("AWS/SQS", "ApproximateNumberOfMessagesVisible"): 1,
            ("AWS/SQS", "ApproximateAgeOfOldestMessage"): 3 * 86_400,
            ("AWS/Lambda", "DestinationDeliveryFailures"): 1,
            ("AWS/Lambda", "Errors"): 1,
            ("AWS/Lambda", "Throttles"): 1,
        }
        for (namespace, _, on_dlq), alarm in found.items():
            assert on_dlq == (namespace == "AWS/SQS")
            if namespace == "AWS/Lambda":
                assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": function}]
        assert len(alarms) == len(found) + 1  # and started minus finished
        assert "sales" in unfinished_alarms(default_synth)
        for alarm in alarms.values():
            assert alarm["AlarmActions"] == alarm["OKActions"] == [{"Ref": alarms_topic}]

    def test_outputs(self, default_synth: Synth) -> None:
        ids = self.ids(default_synth)
        outputs = default_synth.template["Outputs"]
        assert outputs[f"{SUBSCRIBER}FunctionName"]["Value"] == {"Ref": ids["function"]}
        assert outputs[f"{SUBSCRIBER}DeadLetterQueueUrl"]["Value"] == {"Ref": ids["dlq"]}
        assert outputs[f"{SUBSCRIBER}DeadLetterQueueArn"]["Value"] == {
            "Fn::GetAtt": [ids["dlq"], "Arn"]
        }

    def test_nag_clean(self, default_synth: Synth) -> None:
        """Synthesized with AwsSolutions on; the DLQ's one acknowledgment is checked in
        test_nag_and_lint.py."""
        assert default_synth.resources("AWS::Lambda::EventInvokeConfig")
        assert nag_violations(default_synth.template_path.parent) == []


class TestUnfinishedWork:
    @pytest.mark.parametrize("fixture", ["default_synth", "variant_synth"])
    def test_one_alarm_per_idempotency_scope(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        """Every function that holds a scope (CONSUMER_, API_, SUBSCRIBER_SCOPE) gets one
        alarm on `Started - Finished` in that scope, and there is no other."""
        synth: Synth = request.getfixturevalue(fixture)
        scopes = {
            value
            for function in synth.resources("AWS::Lambda::Function").values()
            for name, value in function["Properties"]["Environment"]["Variables"].items()
            if name.endswith("_SCOPE")
        }
        registry = {
            *(c.scope for c in CONSUMERS),
            *(a.scope for a in APIS),
            *(s.scope for t in TOPICS for s in t.subscribers),
            *(s.scope for s in STREAMS),
        }
        assert scopes == registry
        assert set(unfinished_alarms(synth)) == scopes

    def test_alarm_shape(self, default_synth: Synth) -> None:
        alarms_topic, _ = default_synth.resource("AWS::SNS::Topic", "AlarmsTopic")
        for scope, alarm in unfinished_alarms(default_synth).items():
            metrics = {m["Id"]: m for m in alarm["Metrics"]}
            (expression,) = [m for m in metrics.values() if "Expression" in m]
            assert expression["Expression"] == EXPRESSION == "FILL(started, 0) - FILL(finished, 0)"
            assert expression["ReturnData"] is True
            for metric_id, name in (("started", "Started"), ("finished", "Finished")):
                stat = metrics[metric_id]["MetricStat"]
                assert stat["Metric"] == {
                    "Namespace": "ExactlyOnce",
                    "MetricName": name,
                    "Dimensions": [{"Name": "scope", "Value": scope}],
                }
                assert (stat["Period"], stat["Stat"]) == (15 * 60, "Sum")
                assert metrics[metric_id]["ReturnData"] is False
            assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (1, 1)
            assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
            assert alarm["TreatMissingData"] == "notBreaching"
            assert alarm["AlarmActions"] == alarm["OKActions"] == [{"Ref": alarms_topic}]
            assert repr(scope) in alarm["AlarmDescription"]

    def test_namespace_matches_the_functions(self, default_synth: Synth) -> None:
        """The alarm reads the namespace the library writes to (POWERTOOLS_METRICS_NAMESPACE)."""
        for function in default_synth.resources("AWS::Lambda::Function").values():
            variables = function["Properties"]["Environment"]["Variables"]
            if "POWERTOOLS_METRICS_NAMESPACE" in variables:
                assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "ExactlyOnce"

    @pytest.mark.parametrize(
        "prefix", ["OrdersFunction", "PaymentsApiFunction", "SalesCounterFunction"]
    )
    def test_the_library_emits_what_the_alarm_reads(
        self,
        default_synth: Synth,
        prefix: str,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """The contract with exactly_once: under a function's own environment, its lock metrics
        carry exactly the names, namespace and dimension set the alarm reads. CloudWatch
        matches a metric on its whole dimension set: one dimension more (Powertools adds
        `service` from POWERTOOLS_SERVICE_NAME) and the alarm never sees a datapoint."""
        from exactly_once import held_lock, observability

        variables = default_synth.props("AWS::Lambda::Function", prefix)["Environment"]["Variables"]
        for name, value in variables.items():
            if isinstance(value, str):  # table names and queue URLs are references here
                monkeypatch.setenv(name, value)
        monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
        monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
        scope = next(v for k, v in variables.items() if k.endswith("_SCOPE"))
        alarm = unfinished_alarms(default_synth)[scope]
        wanted = {m["Id"]: m["MetricStat"]["Metric"] for m in alarm["Metrics"] if "MetricStat" in m}
        capsys.readouterr()
        for metric_id, name in (("started", held_lock.STARTED), ("finished", held_lock.FINISHED)):
            observability.count_lock_event(name, scope)
            emitted = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
            (directive,) = emitted["_aws"]["CloudWatchMetrics"]
            assert wanted[metric_id]["MetricName"] == name
            assert directive["Namespace"] == wanted[metric_id]["Namespace"]
            assert [m["Name"] for m in directive["Metrics"]] == [name]
            expected = wanted[metric_id]["Dimensions"]
            assert directive["Dimensions"] == [[d["Name"] for d in expected]]
            assert {d["Name"]: d["Value"] for d in expected} == {
                key: emitted[key] for key in directive["Dimensions"][0]
            }

    def test_dashboard_graphs_each_scope(self, default_synth: Synth) -> None:
        (dashboard,) = default_synth.resources("AWS::CloudWatch::Dashboard").values()
        body = json.dumps(dashboard["Properties"]["DashboardBody"])
        for scope in unfinished_alarms(default_synth):
            assert f"{scope} started - finished" in body, scope
        assert body.count(EXPRESSION) == len(unfinished_alarms(default_synth))

    @pytest.mark.parametrize("seconds", [30, 90, 0, 2 * 86_400])
    def test_window_must_be_whole_minutes_up_to_a_day(self, seconds: int) -> None:
        with pytest.raises(ValueError, match="whole minutes"):
            UnfinishedWork("ExactlyOnce", "orders", Duration.seconds(seconds))

    def test_threshold_must_be_positive(self) -> None:
        with pytest.raises(ValueError, match="above 0"):
            UnfinishedWork("ExactlyOnce", "orders", threshold=0)

    def test_window_threshold_and_namespace_reach_the_alarm(self) -> None:
        stack, table, layer = probe_stack()
        consumer = IdempotentConsumer(
            stack,
            "Orders",
            code=INLINE,
            table=table,
            layer=layer,
            metrics_namespace="Shop",
            unfinished_window=Duration.hours(1),
            unfinished_threshold=20,
        )
        assert consumer.unfinished_work.idempotency_scope == "orders"
        template = Template.from_stack(stack).to_json()
        (alarm,) = [
            a["Properties"]
            for a in resources(template, "AWS::CloudWatch::Alarm").values()
            if "Metrics" in a["Properties"]
        ]
        assert alarm["Threshold"] == 20
        started = next(m for m in alarm["Metrics"] if m["Id"] == "started")["MetricStat"]
        assert (started["Metric"]["Namespace"], started["Period"]) == ("Shop", 3600)
        assert "over 60 min" in alarm["AlarmDescription"]


class TestLocalStack:
    """moto's CloudFormation (5.2) skips AWS::SNS::Subscription, and its SNS would invoke a
    subscribed function through Docker: the queue subscription moves into the topic itself,
    and the Lambda subscription stays out."""

    def test_queue_subscription_is_written_into_the_topic(self, local_synth: Synth) -> None:
        topic_id, topic = local_synth.resource("AWS::SNS::Topic", f"{TOPIC}Topic")
        queue_id, _ = local_synth.resource("AWS::SQS::Queue", "OrdersQueue")
        assert topic["Properties"]["Subscription"] == [
            {"Endpoint": {"Fn::GetAtt": [queue_id, "Arn"]}, "Protocol": "sqs"}
        ]
        assert sns_may_send(queue_policy_statements(local_synth, queue_id), queue_id, topic_id)

    def test_no_subscription_resource_and_no_sns_invoke(self, local_synth: Synth) -> None:
        assert not local_synth.resources("AWS::SNS::Subscription")
        assert not [
            p
            for p in local_synth.resources("AWS::Lambda::Permission").values()
            if p["Properties"]["Principal"] == "sns.amazonaws.com"
        ]

    def test_function_dlq_async_config_and_outputs_stay(self, local_synth: Synth) -> None:
        env = local_synth.props("AWS::Lambda::Function", f"{SUBSCRIBER}Function")["Environment"]
        assert env["Variables"]["SUBSCRIBER_SCOPE"] == "sales"
        local_synth.resource("AWS::SQS::Queue", f"{SUBSCRIBER}DeadLetterQueue")
        local_synth.resource("AWS::Lambda::EventInvokeConfig", SUBSCRIBER)  # moto skips it
        outputs = set(local_synth.template["Outputs"])
        assert {
            f"{TOPIC}TopicArn",
            f"{SUBSCRIBER}FunctionName",
            f"{SUBSCRIBER}DeadLetterQueueUrl",
            f"{SUBSCRIBER}DeadLetterQueueArn",
        } <= outputs


class TestConstructs:
    def test_exported_lazily(self) -> None:
        import exactly_once_cdk

        for name, cls in (
            ("IdempotentTopic", IdempotentTopic),
            ("IdempotentSubscriber", IdempotentSubscriber),
        ):
            assert name in exactly_once_cdk.__all__
            assert getattr(exactly_once_cdk, name) is cls

    def test_topic_options_and_grant_publish(self) -> None:
        """Raw delivery, a filter policy and a subscription DLQ reach the subscription; an
        own key replaces the construct's; publishers get exactly Publish and the key's two
        actions; no outputs when asked."""
        stack, table, layer = probe_stack()
        key = kms.Key(stack, "OwnKey", enable_key_rotation=True)
        topic = IdempotentTopic(stack, "Events", master_key=key, outputs=False)
        consumer = IdempotentConsumer(
            stack, "Orders", code=INLINE, table=table, layer=layer, outputs=False
        )
        dlq = sqs.Queue(stack, "SubscriptionDlq", enforce_ssl=True)
        subscription = topic.subscribe_queue(
            consumer,
            raw_message_delivery=True,
            filter_policy={"kind": sns.SubscriptionFilter.string_filter(allowlist=["order"])},
            dead_letter_queue=dlq,
        )
        assert subscription is not None
        assert topic.subscriptions == [subscription]
        publisher = iam.Role(stack, "Publisher", assumed_by=iam.AccountRootPrincipal())
        topic.grant_publish(publisher)
        template = Template.from_stack(stack).to_json()

        key_id = next(iter(resources(template, "AWS::KMS::Key")))
        topic_id = next(iter(resources(template, "AWS::SNS::Topic")))
        assert len(resources(template, "AWS::KMS::Key")) == 1  # OwnKey only
        (sub,) = resources(template, "AWS::SNS::Subscription").values()
        props = sub["Properties"]
        assert props["RawMessageDelivery"] is True
        assert props["FilterPolicy"] == {"kind": ["order"]}
        assert props["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][1] == "Arn"
        (policy,) = [
            p
            for p in resources(template, "AWS::IAM::Policy").values()
            if p["Properties"]["PolicyDocument"]["Statement"][0]["Action"] == "sns:Publish"
        ]
        publish, encrypt = policy["Properties"]["PolicyDocument"]["Statement"]
        assert publish["Resource"] == {"Ref": topic_id}
        assert sorted(actions(encrypt)) == ["kms:Decrypt", "kms:GenerateDataKey"]
        assert encrypt["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}
        assert "Outputs" not in template or not [
            o for o in template["Outputs"] if o.startswith("Events")
        ]

    def test_fifo_queues_cannot_subscribe_to_a_standard_topic(self) -> None:
        stack, table, layer = probe_stack()
        topic = IdempotentTopic(stack, "Events")
        consumer = IdempotentConsumer(
            stack, "Payments", code=INLINE, table=table, layer=layer, fifo=True
        )
        with pytest.raises(ValueError, match="only from FIFO topics"):
            topic.subscribe_queue(consumer)

    def test_inline_subscriptions_take_no_options(self) -> None:
        stack, table, layer = probe_stack()
        topic = IdempotentTopic(stack, "Events")
        consumer = IdempotentConsumer(stack, "Orders", code=INLINE, table=table, layer=layer)
        with pytest.raises(ValueError, match="no raw delivery"):
            topic.subscribe_queue(consumer, raw_message_delivery=True, inline=True)
        assert topic.subscribe_queue(consumer, inline=True) is None

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"retry_attempts": 3}, "retry_attempts 3 is outside 0..2"),
            ({"retry_attempts": -1}, "retry_attempts -1 is outside 0..2"),
            ({"max_event_age": Duration.seconds(30)}, "max_event_age 30 s is outside"),
            ({"max_event_age": Duration.hours(7)}, "max_event_age 25200 s is outside"),
        ],
    )
    def test_subscriber_async_limits(self, options: dict[str, Any], message: str) -> None:
        stack, table, layer = probe_stack()
        topic = IdempotentTopic(stack, "Events")
        with pytest.raises(ValueError, match=message):
            IdempotentSubscriber(
                stack,
                "Counter",
                topic=topic.topic,
                code=INLINE,
                table=table,
                layer=layer,
                **options,
            )

    def test_subscriber_options(self) -> None:
        """No ledger, own scope, retries and event age, a filter policy, a DLQ under a
        customer-managed key (the role and SNS may use it), no outputs."""
        stack, table, layer = probe_stack()
        topic = IdempotentTopic(stack, "Events", outputs=False)
        dlq_key = kms.Key(stack, "DlqKey", enable_key_rotation=True)
        subscriber = IdempotentSubscriber(
            stack,
            "Counter",
            topic=topic.topic,
            code=INLINE,
            table=table,
            layer=layer,
            idempotency_scope="sales-counter",
            retry_attempts=0,
            max_event_age=Duration.minutes(5),
            filter_policy={"kind": sns.SubscriptionFilter.string_filter(allowlist=["sale"])},
            dead_letter_queue_props={
                "encryption": sqs.QueueEncryption.KMS,
                "encryption_master_key": dlq_key,
            },
            environment={"EXTRA": "1"},
            outputs=False,
        )
        assert subscriber.subscription is not None
        template = Template.from_stack(stack).to_json()
        (function,) = [
            f
            for k, f in resources(template, "AWS::Lambda::Function").items()
            if k.startswith("Counter")
        ]
        variables = function["Properties"]["Environment"]["Variables"]
        assert (variables["SUBSCRIBER_SCOPE"], variables["EXTRA"]) == ("sales-counter", "1")
        assert "LEDGER_TABLE" not in variables
        (config,) = resources(template, "AWS::Lambda::EventInvokeConfig").values()
        assert config["Properties"]["MaximumRetryAttempts"] == 0
        assert config["Properties"]["MaximumEventAgeInSeconds"] == 300
        (sub,) = resources(template, "AWS::SNS::Subscription").values()
        assert sub["Properties"]["FilterPolicy"] == {"kind": ["sale"]}
        dlq_key_id = next(k for k in resources(template, "AWS::KMS::Key") if k.startswith("Dlq"))
        statements = [
            s
            for p in resources(template, "AWS::IAM::Policy").values()
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        sids = {s.get("Sid") for s in statements}
        assert "LedgerAppend" not in sids
        (encrypt,) = [s for s in statements if s.get("Sid") == "EncryptForDeadLetterQueue"]
        assert encrypt["Resource"] == {"Fn::GetAtt": [dlq_key_id, "Arn"]}
        key_policy = resources(template, "AWS::KMS::Key")[dlq_key_id]["Properties"]["KeyPolicy"]
        (for_sns,) = [s for s in key_policy["Statement"] if s["Principal"] == SNS]
        assert sorted(actions(for_sns)) == ["kms:Decrypt", "kms:GenerateDataKey"]
        assert "aws:SourceArn" in for_sns["Condition"]["ArnEquals"]
        assert "Outputs" not in template or not [
            o for o in template["Outputs"] if o.startswith("Counter")
        ]

    def test_without_subscription(self) -> None:
        stack, table, layer = probe_stack()
        topic = IdempotentTopic(stack, "Events")
        subscriber = IdempotentSubscriber(
            stack,
            "Counter",
            topic=topic.topic,
            code=INLINE,
            table=table,
            layer=layer,
            subscribe=False,
        )
        template = Template.from_stack(stack).to_json()
        assert subscriber.subscription is None
        assert not resources(template, "AWS::SNS::Subscription")
        assert not resources(template, "AWS::Lambda::Permission")
        assert len(resources(template, "AWS::Lambda::EventInvokeConfig")) == 1
        assert {"CounterFunctionName", "CounterDeadLetterQueueUrl", "EventsTopicArn"} <= set(
            template["Outputs"]
        )
        assert len(subscriber.alarms) == 6
        # DLQ, function, asynchronous invocations, started minus finished, outcomes
        assert len(subscriber.dashboard_widgets()) == 5

    def test_nag_passes_both_and_refuses_a_weakened_dead_letter_queue(self, tmp_path: Path) -> None:
        """The defaults are nag clean; whoever opens the subscriber's DLQ to plain HTTP through
        `dead_letter_queue_props` must acknowledge it."""
        app = App(outdir=str(tmp_path))
        stack, table, layer = probe_stack(app)
        ledger = LedgerTable(stack, "Ledger")
        topic = IdempotentTopic(stack, "Events")
        consumer = IdempotentConsumer(stack, "Orders", code=INLINE, table=table, layer=layer)
        topic.subscribe_queue(consumer)
        for name, props in (("Counter", {}), ("Open", {"enforce_ssl": False})):
            IdempotentSubscriber(
                stack,
                name,
                topic=topic.topic,
                code=INLINE,
                table=table,
                layer=layer,
                ledger=ledger,
                dead_letter_queue_props=props,
            )
        Validations.of(app).add_plugins(AwsSolutionsChecks(app))
        with pytest.raises(RuntimeError, match="ValidationFailed"):
            app.synth()
        report = json.loads((tmp_path / "validation-report.json").read_text())
        paths = {
            (v["ruleName"], c["constructPath"].split("/")[1])
            for p in report["pluginReports"]
            for v in p["violations"]
            for c in v["violatingConstructs"]
        }
        assert paths == {("AwsSolutions-SQS4", "Open")}
