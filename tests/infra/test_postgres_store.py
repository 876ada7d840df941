"""The stack on the PostgreSQL store (`-c store=postgres`): Aurora Serverless v2 behind RDS Proxy
in an isolated VPC, the functions' variables, network and grants, the schema migration, the
cleanup schedule, the layer with psycopg; and the DynamoDB synth untouched by any of it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from exactly_once_cdk.layer_build import (
    POSTGRES_LAYER_DIR,
    POSTGRES_REQUIREMENTS,
    build_layer,
    inputs_hash,
)
from exactly_once_cdk.postgres_jobs import CLEANUP_HANDLER, MIGRATE_HANDLER
from exactly_once_cdk.postgres_store import DATABASE_NAME, DATABASE_USER
from infra.apis import APIS
from infra.consumers import CONSUMERS
from infra.streams import STREAMS
from infra.topics import TOPICS
from tests.infra.conftest import Synth
from tests.infra.test_nag_and_lint import acknowledgments, nag_violations
from tests.infra.test_template import actions, ref_id, role_statements, statements

BOTH = ["postgres_synth", "postgres_prod_synth"]
ENTRY_POINTS = (
    *(c.id for c in CONSUMERS),
    *(a.id for a in APIS),
    *(s.id for t in TOPICS for s in t.subscribers),
    *(s.id for s in STREAMS),
)
# Every function that opens the store: the entry points, the monitor, and the two jobs.
STORE_FUNCTIONS = (*ENTRY_POINTS, "LockMonitor", "DatabaseSchema", "DatabaseCleanup")
DSN = re.compile(
    rf"^host=\{{proxy\}} port=5432 dbname={DATABASE_NAME} user={DATABASE_USER} sslmode=require$"
)


def synth_of(request: pytest.FixtureRequest, fixture: str) -> Synth:
    synth: Synth = request.getfixturevalue(fixture)
    return synth


def function(synth: Synth, prefix: str) -> tuple[str, dict[str, Any]]:
    return synth.resource("AWS::Lambda::Function", f"{prefix}Function")


def proxy_id(synth: Synth) -> str:
    return synth.resource("AWS::RDS::DBProxy", "DatabaseProxy")[0]


def rendered_dsn(synth: Synth, value: Any) -> str:
    """The DSN's Fn::Join with the proxy's endpoint written as {proxy} (checked to be it)."""
    parts = value["Fn::Join"][1]
    text = ""
    for part in parts:
        if isinstance(part, str):
            text += part
        else:
            assert part == {"Fn::GetAtt": [proxy_id(synth), "Endpoint"]}
            text += "{proxy}"
    return text


def security_group(synth: Synth, name: str) -> str:
    return synth.resource("AWS::EC2::SecurityGroup", f"DatabaseNetwork{name}")[0]


class TestCluster:
    @pytest.mark.parametrize("fixture", BOTH)
    def test_aurora_postgresql_serverless_v2_with_one_writer(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        synth = synth_of(request, fixture)
        cluster_id, cluster = synth.resource("AWS::RDS::DBCluster", "DatabaseCluster")
        props = cluster["Properties"]
        assert props["Engine"] == "aurora-postgresql"
        assert props["ServerlessV2ScalingConfiguration"] == {"MinCapacity": 0.5, "MaxCapacity": 4}
        assert props["DatabaseName"] == DATABASE_NAME
        (instance,) = synth.resources("AWS::RDS::DBInstance").values()
        assert instance["Properties"]["DBInstanceClass"] == "db.serverless"
        assert instance["Properties"]["DBClusterIdentifier"] == {"Ref": cluster_id}
        assert instance["Properties"]["PubliclyAccessible"] is False

    @pytest.mark.parametrize("fixture", BOTH)
    def test_encrypted_with_a_rotating_customer_managed_key(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        synth = synth_of(request, fixture)
        key_id, key = synth.resource("AWS::KMS::Key", "DatabaseKey")
        assert key["Properties"]["EnableKeyRotation"] is True
        cluster = synth.props("AWS::RDS::DBCluster", "DatabaseCluster")
        assert cluster["StorageEncrypted"] is True
        assert cluster["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
        # The generated password is under the same key.
        (secret,) = synth.resources("AWS::SecretsManager::Secret").values()
        assert secret["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}

    @pytest.mark.parametrize("fixture", BOTH)
    def test_iam_auth_backups_and_a_generated_password(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        synth = synth_of(request, fixture)
        cluster = synth.props("AWS::RDS::DBCluster", "DatabaseCluster")
        assert cluster["EnableIAMDatabaseAuthentication"] is True
        assert cluster["BackupRetentionPeriod"] == 7
        assert cluster["MasterUsername"] == DATABASE_USER
        ((secret_id, secret),) = synth.resources("AWS::SecretsManager::Secret").items()
        generated = secret["Properties"]["GenerateSecretString"]
        assert generated["GenerateStringKey"] == "password"
        assert f'"username":"{DATABASE_USER}"' in generated["SecretStringTemplate"]
        # The password reaches the cluster as a dynamic reference, never as text.
        assert {"Ref": secret_id} in cluster["MasterUserPassword"]["Fn::Join"][1]

    def test_dev_is_destroyable(self, postgres_synth: Synth) -> None:
        _, cluster = postgres_synth.resource("AWS::RDS::DBCluster", "DatabaseCluster")
        assert cluster["DeletionPolicy"] == "Delete"
        assert cluster["Properties"]["DeletionProtection"] is False
        _, key = postgres_synth.resource("AWS::KMS::Key", "DatabaseKey")
        assert key["DeletionPolicy"] == "Delete"

    def test_prod_protects_snapshots_and_keeps_the_key(self, postgres_prod_synth: Synth) -> None:
        synth = postgres_prod_synth
        _, cluster = synth.resource("AWS::RDS::DBCluster", "DatabaseCluster")
        assert (cluster["DeletionPolicy"], cluster["UpdateReplacePolicy"]) == (
            "Snapshot",
            "Snapshot",
        )
        assert cluster["Properties"]["DeletionProtection"] is True
        _, key = synth.resource("AWS::KMS::Key", "DatabaseKey")
        assert (key["DeletionPolicy"], key["UpdateReplacePolicy"]) == ("Retain", "Retain")


class TestProxy:
    @pytest.mark.parametrize("fixture", BOTH)
    def test_requires_tls_and_iam_auth(self, fixture: str, request: pytest.FixtureRequest) -> None:
        synth = synth_of(request, fixture)
        props = synth.props("AWS::RDS::DBProxy", "DatabaseProxy")
        assert props["RequireTLS"] is True
        assert props["EngineFamily"] == "POSTGRESQL"
        (auth,) = props["Auth"]
        assert auth["IAMAuth"] == "REQUIRED"
        attachment_id, _ = synth.resource(
            "AWS::SecretsManager::SecretTargetAttachment", "DatabaseCluster"
        )
        assert auth["SecretArn"] == {"Ref": attachment_id}
        assert [ref_id(g) for g in props["VpcSecurityGroupIds"]] == [security_group(synth, "Proxy")]

    def test_sets_the_store_timeouts_on_each_database_connection(
        self, postgres_synth: Synth
    ) -> None:
        """Sent by each client as startup options, they would pin it behind the proxy."""
        target = postgres_synth.props("AWS::RDS::DBProxyTargetGroup", "DatabaseProxy")
        query = target["ConnectionPoolConfigurationInfo"]["InitQuery"]
        assert query == (
            "SET statement_timeout = 10000; SET lock_timeout = 2000; "
            "SET idle_in_transaction_session_timeout = 60000"
        )

    def test_targets_the_cluster(self, postgres_synth: Synth) -> None:
        cluster_id, _ = postgres_synth.resource("AWS::RDS::DBCluster", "DatabaseCluster")
        target = postgres_synth.props("AWS::RDS::DBProxyTargetGroup", "DatabaseProxy")
        assert target["DBClusterIdentifiers"] == [{"Ref": cluster_id}]
        assert target["DBProxyName"] == {"Ref": proxy_id(postgres_synth)}


class TestNetwork:
    def test_isolated_subnets_only_no_nat_no_internet(self, postgres_synth: Synth) -> None:
        types = {r["Type"] for r in postgres_synth.template["Resources"].values()}
        for absent in (
            "AWS::EC2::NatGateway",
            "AWS::EC2::InternetGateway",
            "AWS::EC2::VPCGatewayAttachment",
            "AWS::EC2::EIP",
            "AWS::EC2::Route",
        ):
            assert absent not in types
        subnets = postgres_synth.resources("AWS::EC2::Subnet")
        assert len(subnets) == 2
        assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())
        tags = [{t["Key"]: t["Value"] for t in s["Properties"]["Tags"]} for s in subnets.values()]
        assert {t["aws-cdk:subnet-type"] for t in tags} == {"Isolated"}
        group = postgres_synth.props("AWS::RDS::DBSubnetGroup", "DatabaseCluster")
        assert sorted(ref_id(s) for s in group["SubnetIds"]) == sorted(subnets)

    def test_security_groups_allow_exactly_the_store_path(self, postgres_synth: Synth) -> None:
        """functions -5432-> proxy -5432-> database; functions -443-> endpoints; nothing else."""
        synth = postgres_synth
        names = {
            security_group(synth, name): name
            for name in ("Functions", "Proxy", "Database", "Endpoints")
        }
        assert set(names) == set(synth.resources("AWS::EC2::SecurityGroup"))
        cluster_id, _ = synth.resource("AWS::RDS::DBCluster", "DatabaseCluster")
        cluster_port = {"Fn::GetAtt": [cluster_id, "Endpoint.Port"]}

        def rules(type_: str, peer_key: str) -> set[tuple[str, str, int]]:
            found = set()
            for rule in synth.resources(type_).values():
                p = rule["Properties"]
                assert (p["IpProtocol"], p["FromPort"]) == ("tcp", p["ToPort"])
                port = 5432 if p["ToPort"] == cluster_port else p["ToPort"]
                found.add((names[ref_id(p["GroupId"])], names[ref_id(p[peer_key])], port))
            return found

        assert rules("AWS::EC2::SecurityGroupEgress", "DestinationSecurityGroupId") == {
            ("Functions", "Proxy", 5432),
            ("Functions", "Endpoints", 443),
            ("Proxy", "Database", 5432),
        }
        assert rules("AWS::EC2::SecurityGroupIngress", "SourceSecurityGroupId") == {
            ("Proxy", "Functions", 5432),
            ("Endpoints", "Functions", 443),
            ("Database", "Proxy", 5432),
        }
        for group_id in names:
            props = synth.template["Resources"][group_id]["Properties"]
            assert "SecurityGroupIngress" not in props
            # Inline, at most CDK's match-nothing placeholder where a group has no egress rule;
            # CloudFormation drops the default allow-all egress once one rule is added.
            assert [e["CidrIp"] for e in props.get("SecurityGroupEgress", [])] in (
                [],
                ["255.255.255.255/32"],
            )
        cluster = synth.props("AWS::RDS::DBCluster", "DatabaseCluster")
        assert [ref_id(g) for g in cluster["VpcSecurityGroupIds"]] == [
            security_group(synth, "Database")
        ]
        assert cluster["Port"] == 5432

    def test_one_interface_endpoint_for_sqs_and_no_gateway_endpoint(
        self, postgres_synth: Synth
    ) -> None:
        (endpoint,) = postgres_synth.resources("AWS::EC2::VPCEndpoint").values()
        props = endpoint["Properties"]
        assert props["VpcEndpointType"] == "Interface"
        assert props["PrivateDnsEnabled"] is True
        service = props["ServiceName"]
        assert service["Fn::Join"][1][-1] == ".sqs"
        assert [ref_id(g) for g in props["SecurityGroupIds"]] == [
            security_group(postgres_synth, "Endpoints")
        ]

    def test_rejected_traffic_is_logged(self, postgres_synth: Synth) -> None:
        (flow_log,) = postgres_synth.resources("AWS::EC2::FlowLog").values()
        assert flow_log["Properties"]["TrafficType"] == "REJECT"
        assert flow_log["Properties"]["LogDestinationType"] == "cloud-watch-logs"


class TestFunctions:
    @pytest.mark.parametrize("fixture", BOTH)
    @pytest.mark.parametrize("prefix", STORE_FUNCTIONS)
    def test_in_the_vpc_with_the_dsn_and_without_a_table(
        self, fixture: str, prefix: str, request: pytest.FixtureRequest
    ) -> None:
        synth = synth_of(request, fixture)
        _, fn = function(synth, prefix)
        variables = fn["Properties"]["Environment"]["Variables"]
        assert DSN.match(rendered_dsn(synth, variables["IDEMPOTENCY_DSN"]))
        assert variables["IDEMPOTENCY_DB_IAM_AUTH"] == "true"
        assert variables["IDEMPOTENCY_PG_SESSION_SETTINGS"] == "server"  # the proxy sets them
        assert "IDEMPOTENCY_TABLE" not in variables  # both set is a ConfigurationError
        assert "LEDGER_TABLE" not in variables  # the examples' ledger is in PostgreSQL
        vpc = fn["Properties"]["VpcConfig"]
        assert [ref_id(g) for g in vpc["SecurityGroupIds"]] == [security_group(synth, "Functions")]
        assert sorted(ref_id(s) for s in vpc["SubnetIds"]) == sorted(
            synth.resources("AWS::EC2::Subnet")
        )

    @pytest.mark.parametrize("prefix", STORE_FUNCTIONS)
    def test_connect_only_as_the_store_user_on_the_proxy(
        self, postgres_synth: Synth, prefix: str
    ) -> None:
        found = role_statements(postgres_synth, f"{prefix}FunctionRole")
        (connect,) = [s for s in found.values() if "rds-db:connect" in actions(s)]
        assert connect["Sid"] == "ConnectToStore"
        assert connect["Action"] == "rds-db:connect"
        parts = connect["Resource"]["Fn::Join"][1]
        assert parts[-2:] == [
            {
                "Fn::Select": [
                    6,
                    {
                        "Fn::Split": [
                            ":",
                            {"Fn::GetAtt": [proxy_id(postgres_synth), "DBProxyArn"]},
                        ]
                    },
                ]
            },
            f"/{DATABASE_USER}",
        ]
        assert ":dbuser:" in parts
        assert found["AttachToVpc"]["Resource"] == "*"

    def test_no_dynamodb_anywhere(self, postgres_synth: Synth) -> None:
        assert postgres_synth.resources("AWS::DynamoDB::Table") == {}
        assert not [
            s for _, s in statements(postgres_synth) if any("dynamodb:" in a for a in actions(s))
        ]
        outputs = postgres_synth.template["Outputs"]
        assert "IdempotencyTableName" not in outputs
        assert "LedgerTableName" not in outputs
        assert DSN.match(rendered_dsn(postgres_synth, outputs["IdempotencyDsn"]["Value"]))

    @pytest.mark.parametrize("prefix", [*ENTRY_POINTS, "LockMonitor", "DatabaseCleanup"])
    def test_deployed_after_the_schema(self, postgres_synth: Synth, prefix: str) -> None:
        schema_id, _ = postgres_synth.resource("Custom::ExactlyOnceSchema", "DatabaseSchema")
        _, fn = function(postgres_synth, prefix)
        assert schema_id in fn["DependsOn"]


class TestSchemaMigration:
    def test_custom_resource_runs_the_layers_migrations(self, postgres_synth: Synth) -> None:
        synth = postgres_synth
        _, schema = synth.resource("Custom::ExactlyOnceSchema", "DatabaseSchema")
        framework_id, _ = synth.resource("AWS::Lambda::Function", "DatabaseSchemaProvider")
        layer_id, _ = synth.resource("AWS::Lambda::LayerVersion", "SharedLayer")
        props = schema["Properties"]
        assert props["ServiceToken"] == {"Fn::GetAtt": [framework_id, "Arn"]}
        # A new layer (new migrations) updates the resource, which migrates again.
        assert props["LayerVersionArn"] == {"Ref": layer_id}
        _, migrate = function(synth, "DatabaseSchema")
        assert migrate["Properties"]["Handler"] == MIGRATE_HANDLER
        assert migrate["Properties"]["Layers"] == [{"Ref": layer_id}]
        assert migrate["Properties"]["Timeout"] == 600
        assert "IDEMPOTENCY_DB_SECRET_ARN" not in migrate["Properties"]["Environment"]["Variables"]

    def test_runs_after_the_writer_and_the_proxy_target(self, postgres_synth: Synth) -> None:
        _, schema = postgres_synth.resource("Custom::ExactlyOnceSchema", "DatabaseSchema")
        writer_id, _ = postgres_synth.resource("AWS::RDS::DBInstance", "DatabaseClusterWriter")
        target_id, _ = postgres_synth.resource("AWS::RDS::DBProxyTargetGroup", "DatabaseProxy")
        assert {writer_id, target_id, proxy_id(postgres_synth)} <= set(schema["DependsOn"])

    def test_no_function_reads_the_secret(self, postgres_synth: Synth) -> None:
        """IAM auth everywhere: only the proxy's own role may read the password."""
        readers = {
            owner
            for owner, s in statements(postgres_synth)
            if "secretsmanager:GetSecretValue" in actions(s)
        }
        (reader,) = readers
        role_id, _ = postgres_synth.resource("AWS::IAM::Role", "DatabaseProxyIAMRole")
        policy = postgres_synth.template["Resources"][reader]["Properties"]
        assert [ref_id(r) for r in policy["Roles"]] == [role_id]

    def test_the_provider_framework_role_has_no_managed_policy(self, postgres_synth: Synth) -> None:
        _, role = postgres_synth.resource("AWS::IAM::Role", "DatabaseSchemaProviderRole")
        assert "ManagedPolicyArns" not in role["Properties"]
        _, framework = postgres_synth.resource("AWS::Lambda::Function", "DatabaseSchemaProvider")
        assert "VpcConfig" not in framework["Properties"]  # it only invokes and answers CFN


class TestCleanup:
    def test_hourly_schedule_invokes_the_cleanup(self, postgres_synth: Synth) -> None:
        function_id, fn = function(postgres_synth, "DatabaseCleanup")
        assert fn["Properties"]["Handler"] == CLEANUP_HANDLER
        rule = postgres_synth.props("AWS::Events::Rule", "DatabaseCleanupSchedule")
        assert rule["ScheduleExpression"] == "rate(1 hour)"
        (target,) = rule["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [function_id, "Arn"]}

    def test_errors_alarm_the_topic(self, postgres_synth: Synth) -> None:
        function_id, _ = function(postgres_synth, "DatabaseCleanup")
        alarm = postgres_synth.props("AWS::CloudWatch::Alarm", "DatabaseCleanupErrorsAlarm")
        assert alarm["MetricName"] == "Errors"
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function_id}}]
        topic_id, _ = postgres_synth.resource("AWS::SNS::Topic", "AlarmsTopic")
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]


class TestCapacity:
    def test_alarm_near_the_maximum_capacity(self, postgres_synth: Synth) -> None:
        cluster_id, _ = postgres_synth.resource("AWS::RDS::DBCluster", "DatabaseCluster")
        alarm = postgres_synth.props("AWS::CloudWatch::Alarm", "DatabaseCapacityAlarm")
        assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/RDS", "ACUUtilization")
        assert alarm["Dimensions"] == [
            {"Name": "DBClusterIdentifier", "Value": {"Ref": cluster_id}}
        ]
        assert (alarm["Statistic"], alarm["Threshold"]) == ("Maximum", 90)
        topic_id, _ = postgres_synth.resource("AWS::SNS::Topic", "AlarmsTopic")
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]

    def test_dashboard_shows_the_database_instead_of_table_throttles(
        self, postgres_synth: Synth
    ) -> None:
        body = str(postgres_synth.props("AWS::CloudWatch::Dashboard", "Dashboard")["DashboardBody"])
        assert "Idempotency database capacity" in body
        assert "ServerlessDatabaseCapacity" in body
        assert "DynamoDB throttle events" not in body


class TestLayer:
    def test_the_stack_layer_carries_psycopg(self, postgres_synth: Synth) -> None:
        layer = postgres_synth.props("AWS::Lambda::LayerVersion", "SharedLayer")
        assert "psycopg" in layer["Description"]
        asset = postgres_synth.template_path.parent / f"asset.{_asset_hash(layer)}"
        site = asset / "python"
        for module in ("psycopg", "psycopg_pool", "psycopg_binary", "exactly_once"):
            assert (site / module).is_dir(), module
        native = [p.name for p in (site / "psycopg_binary").glob("*.so")]
        assert native
        assert all("cpython-313-aarch64" in name for name in native), native

    def test_pins_reach_the_layer(self) -> None:
        site = build_layer(POSTGRES_LAYER_DIR, postgres=True) / "python"
        for line in POSTGRES_REQUIREMENTS.read_text().splitlines():
            if line and not line.startswith("#"):
                name, version = line.split("==")
                dist = name.split("[")[0].replace("-", "_")
                assert (site / f"{dist}-{version}.dist-info").is_dir(), line

    def test_postgres_changes_the_cache_key(self) -> None:
        assert inputs_hash(postgres=True) != inputs_hash()


def _asset_hash(layer_props: dict[str, Any]) -> str:
    return str(layer_props["Content"]["S3Key"]).removesuffix(".zip")


class TestNagAndLint:
    @pytest.mark.parametrize("fixture", BOTH)
    def test_nag_clean(self, fixture: str, request: pytest.FixtureRequest) -> None:
        synth = synth_of(request, fixture)
        assert nag_violations(synth.template_path.parent) == []

    @pytest.mark.parametrize("fixture", BOTH)
    def test_every_acknowledgment_gives_a_specific_reason(
        self, fixture: str, request: pytest.FixtureRequest
    ) -> None:
        synth = synth_of(request, fixture)
        by_rule: dict[str, set[str]] = {}
        reasons: dict[str, list[str]] = {}
        for path, rule, reason in acknowledgments(synth):
            if not rule.startswith("AwsSolutions-"):
                continue  # CDK's own, for the CloudFormation validation of its constructs
            assert len(reason) > 40, (rule, reason)
            by_rule.setdefault(rule, set()).add(path.split("/", 1)[1])
            reasons.setdefault(rule, []).append(reason)
        (invoke,) = [rule for rule in by_rule if rule.endswith(".Arn>:*]")]
        assert invoke.startswith("AwsSolutions-IAM5[Resource::<DatabaseSchemaFunction")
        assert by_rule.pop(invoke) == {"Database/Schema/ProviderRole"}
        assert by_rule.pop("AwsSolutions-SMG4") == {"Database/Cluster/Secret"}
        assert "RDS Proxy" in reasons["AwsSolutions-SMG4"][0]
        assert by_rule.pop("AwsSolutions-SQS3") == {
            *(f"{sub.id}/DeadLetterQueue" for topic in TOPICS for sub in topic.subscribers),
            *(
                f"{s.id}/{queue}"
                for s in STREAMS
                for queue in ("DeadLetterQueue", "OnFailureQueue")
            ),
        }
        # Every function in the VPC, each for Lambda's network interfaces (and for X-Ray too
        # where tracing is on).
        assert by_rule.pop("AwsSolutions-IAM5[Resource::*]") == {
            *(f"{prefix}/FunctionRole" for prefix in (*ENTRY_POINTS, "LockMonitor")),
            "Database/Schema/FunctionRole",
            "Database/Cleanup/FunctionRole",
        }
        vpc_reasons = [r for r in reasons["AwsSolutions-IAM5[Resource::*]"] if "VPC" in r]
        assert len(vpc_reasons) == len(STORE_FUNCTIONS)
        assert all("ec2:CreateNetworkInterface" in r for r in vpc_reasons)
        # The runtime is the layer's target (3.13 by default), whose interpreter compiled its
        # bytecode, not necessarily the newest.
        assert by_rule.pop("AwsSolutions-L1") == {
            *(f"{prefix}/Function" for prefix in (*ENTRY_POINTS, "LockMonitor")),
            "Database/Schema/Function",
            "Database/Cleanup/Function",
        }
        # Deletion protection is off only where the stage destroys its data anyway.
        dev = fixture == "postgres_synth"
        assert by_rule == ({"AwsSolutions-RDS10": {"Database/Cluster"}} if dev else {})

    @pytest.mark.parametrize("fixture", BOTH)
    def test_cfn_lint_clean(self, fixture: str, request: pytest.FixtureRequest) -> None:
        synth = synth_of(request, fixture)
        matches = lint_file(synth.template_path, ManualArgs(regions=["us-east-1", "eu-west-1"]))
        # W3005, a DependsOn next to a Ref or GetAtt to the same resource, is all CDK adds here:
        # on each function's role (lambda.Function, also for the provider framework and the
        # VPC's default-group custom resource) and on the cluster (the proxy's target group).
        # W3010 (hardcoded availability zones) on prod only: a prod stack is bound to its
        # account and region, and CDK then writes the VPC's subnets with the AZ names it looked
        # up for that account (cdk.context.json), as it does for every environment-bound VPC.
        bound = synth.stack.settings.is_prod
        findings = [
            str(m)
            for m in matches
            if not (
                m.rule.id == "W3005"
                and ("/Properties/Role'" in m.message or "/DBClusterIdentifiers/" in m.message)
            )
            and not (bound and m.rule.id == "W3010")
        ]
        assert findings == []


class TestDynamoDbSynthUnchanged:
    """The default synth has none of it: what the store option touched stays as it was."""

    def test_no_vpc_no_database(self, default_synth: Synth) -> None:
        types = {r["Type"] for r in default_synth.template["Resources"].values()}
        assert not {t for t in types if t.startswith(("AWS::EC2::", "AWS::RDS::"))}
        assert "Custom::ExactlyOnceSchema" not in types
        assert "AWS::SecretsManager::Secret" not in types
        assert len(default_synth.resources("AWS::DynamoDB::Table")) == 2
        assert "IdempotencyDsn" not in default_synth.template["Outputs"]
        assert {"IdempotencyTableName", "LedgerTableName"} <= set(default_synth.template["Outputs"])

    @pytest.mark.parametrize("prefix", [*ENTRY_POINTS, "LockMonitor"])
    def test_functions_name_the_table_and_stay_out_of_any_vpc(
        self, default_synth: Synth, prefix: str
    ) -> None:
        table_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")
        _, fn = function(default_synth, prefix)
        variables = fn["Properties"]["Environment"]["Variables"]
        # The table's variable comes first, as it always did (the template's text unchanged).
        assert next(iter(variables.items())) == ("IDEMPOTENCY_TABLE", {"Ref": table_id})
        assert not {"IDEMPOTENCY_DSN", "IDEMPOTENCY_DB_IAM_AUTH"} & set(variables)
        assert "VpcConfig" not in fn["Properties"]
        assert "AttachToVpc" not in role_statements(default_synth, f"{prefix}FunctionRole")
        assert not [d for d in fn.get("DependsOn", []) if not d.startswith(f"{prefix}FunctionRole")]

    def test_layer_without_psycopg(self, default_synth: Synth) -> None:
        layer = default_synth.props("AWS::Lambda::LayerVersion", "SharedLayer")
        assert layer["Description"] == "exactly_once package and pinned Powertools"
        site = default_synth.template_path.parent / f"asset.{_asset_hash(layer)}" / "python"
        assert (site / "exactly_once").is_dir()
        assert not list(site.glob("psycopg*"))
