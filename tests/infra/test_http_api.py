"""`IdempotentHttpApi` in the repo's stack (PaymentsApi) and on its own: IAM on every route,
throttling and JSON access logs on the `$default` stage, a minimal role, alarms, outputs, nag."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack, Validations
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from exactly_once_cdk import ExactlyOnceDashboard, IdempotencyTable, IdempotentHttpApi, LedgerTable
from exactly_once_cdk.http_api import ACCESS_LOG_FIELDS
from infra.apis import APIS, ROOT, by_id
from tests.infra.conftest import Synth
from tests.infra.test_nag_and_lint import nag_violations
from tests.infra.test_template import actions, ref_id, role_statements

API = "PaymentsApi"
API_OUTPUTS = {f"{API}Url", f"{API}ApiId", f"{API}FunctionName"}
LAYER_ARN = "arn:aws:lambda:us-east-1:123456789012:layer:probe:1"
INLINE = lambda_.Code.from_inline("def handle(event, context):\n    return {}\n")


def resources(template: Mapping[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_}


def probe_stack(app: App | None = None) -> tuple[Stack, IdempotencyTable, lambda_.ILayerVersion]:
    stack = Stack(app or App(), "Probe")
    table = IdempotencyTable(stack, "Idempotency")
    layer = lambda_.LayerVersion.from_layer_version_arn(stack, "Layer", LAYER_ARN)
    return stack, table, layer


class TestRegistry:
    def test_payments_api(self) -> None:
        spec = by_id(API)
        assert [a.id for a in APIS] == [API]
        assert (spec.scope, spec.routes, spec.handler) == (
            "payments-api",
            (("POST", "/payments"),),
            "handler.handle",
        )
        assert (spec.source_path / "handler.py").is_file()
        with pytest.raises(KeyError, match=API):
            by_id("Nope")

    def test_registry_imports_without_cdk(self) -> None:
        """The local HTTP gateway imports it; it must not need (or pay for) jsii."""
        code = (
            "import sys, infra.apis; print('aws_cdk' in sys.modules, 'constructs' in sys.modules)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == "False False"


class TestRepoStack:
    def test_every_route_is_iam_authorized_and_calls_the_function(
        self, default_synth: Synth
    ) -> None:
        api_id, _ = default_synth.resource("AWS::ApiGatewayV2::Api", API)
        function_id, _ = default_synth.resource("AWS::Lambda::Function", f"{API}Function")
        routes = default_synth.resources("AWS::ApiGatewayV2::Route")
        assert {r["Properties"]["RouteKey"] for r in routes.values()} == {"POST /payments"}
        for route in routes.values():
            assert route["Properties"]["AuthorizationType"] == "AWS_IAM"
            assert route["Properties"]["ApiId"] == {"Ref": api_id}
        (integration,) = default_synth.resources("AWS::ApiGatewayV2::Integration").values()
        props = integration["Properties"]
        assert (props["IntegrationType"], props["PayloadFormatVersion"]) == ("AWS_PROXY", "2.0")
        assert props["IntegrationUri"] == {"Fn::GetAtt": [function_id, "Arn"]}

    def test_api_is_named_for_the_stack(self, default_synth: Synth) -> None:
        props = default_synth.props("AWS::ApiGatewayV2::Api", API)
        assert (props["Name"], props["ProtocolType"]) == (f"ExactlyOnceSqs-{API}", "HTTP")
        assert "DisableExecuteApiEndpoint" not in props

    def test_one_default_stage_throttled_and_logged(self, default_synth: Synth) -> None:
        (stage,) = default_synth.resources("AWS::ApiGatewayV2::Stage").values()
        props = stage["Properties"]
        assert (props["StageName"], props["AutoDeploy"]) == ("$default", True)
        assert props["DefaultRouteSettings"] == {
            "ThrottlingRateLimit": 50,
            "ThrottlingBurstLimit": 100,
        }
        logs_id, logs = default_synth.resource("AWS::Logs::LogGroup", f"{API}AccessLogs")
        assert logs["Properties"]["RetentionInDays"] == 30
        settings = props["AccessLogSettings"]
        assert settings["DestinationArn"] == {"Fn::GetAtt": [logs_id, "Arn"]}
        fields = json.loads(settings["Format"])
        assert fields == ACCESS_LOG_FIELDS
        for key in ("requestId", "ip", "caller", "principal", "routeKey", "status"):
            assert key in fields, key
        for key in ("protocol", "responseLength", "integrationError", "httpMethod"):
            assert key in fields, key
        # Nothing from the request itself: no header (the Idempotency-Key), no body, no query.
        assert all(v.startswith("$context.") for v in fields.values())
        assert "idempotency" not in settings["Format"].lower()

    def test_variant_log_retention_and_removal(self, variant_synth: Synth) -> None:
        _, logs = variant_synth.resource("AWS::Logs::LogGroup", f"{API}AccessLogs")
        assert logs["Properties"]["RetentionInDays"] == 90
        assert logs["DeletionPolicy"] == "Retain"

    def test_function_environment_and_timeout(self, default_synth: Synth) -> None:
        props = default_synth.props("AWS::Lambda::Function", f"{API}Function")
        idem_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")
        ledger_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesLedger")
        assert props["Environment"]["Variables"] == {
            "IDEMPOTENCY_TABLE": {"Ref": idem_id},
            "LEDGER_TABLE": {"Ref": ledger_id},
            "API_SCOPE": "payments-api",
            "POWERTOOLS_SERVICE_NAME": "payments-api",
            "POWERTOOLS_METRICS_NAMESPACE": "ExactlyOnce",
            "LEASE_MARGIN_MS": "5000",
            "BLOCK_EXPIRED_LEASES": "false",
        }
        assert props["Timeout"] == 29  # under API Gateway's 30 s integration limit
        assert (props["MemorySize"], props["Handler"]) == (256, "handler.handle")

    def test_variant_function_tuning_is_not_the_consumers(self, variant_synth: Synth) -> None:
        """`functionTimeoutSeconds=20` tunes consumers; the API keeps its own 29 s."""
        assert variant_synth.props("AWS::Lambda::Function", f"{API}Function")["Timeout"] == 29

    def test_role_has_only_records_ledger_and_own_logs(self, default_synth: Synth) -> None:
        by_sid = role_statements(default_synth, f"{API}FunctionRole")
        assert set(by_sid) == {"WriteOwnLogs", "IdempotencyRecords", "LedgerAppend"}
        idem_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesIdempotency")
        ledger_id, _ = default_synth.resource("AWS::DynamoDB::Table", "TablesLedger")
        logs_id, _ = default_synth.resource("AWS::Logs::LogGroup", f"{API}FunctionLogs")
        assert sorted(actions(by_sid["IdempotencyRecords"])) == [
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
        ]
        assert ref_id(by_sid["IdempotencyRecords"]["Resource"]) == idem_id
        assert actions(by_sid["LedgerAppend"]) == ["dynamodb:PutItem"]
        assert ref_id(by_sid["LedgerAppend"]["Resource"]) == ledger_id
        assert ref_id(by_sid["WriteOwnLogs"]["Resource"]) == logs_id

    def test_only_this_api_may_invoke_the_function_on_its_route(self, default_synth: Synth) -> None:
        api_id, _ = default_synth.resource("AWS::ApiGatewayV2::Api", API)
        function_id, _ = default_synth.resource("AWS::Lambda::Function", f"{API}Function")
        permissions = [
            p["Properties"]
            for p in default_synth.resources("AWS::Lambda::Permission").values()
            if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
        ]
        assert len(permissions) == 1
        (permission,) = permissions
        assert permission["FunctionName"] == {"Fn::GetAtt": [function_id, "Arn"]}
        parts = permission["SourceArn"]["Fn::Join"][1]
        assert {"Ref": api_id} in parts
        assert parts[-1] == "/*/*/payments"

    def test_alarms_notify_the_topic(self, default_synth: Synth) -> None:
        topic_id, _ = default_synth.resource("AWS::SNS::Topic", "AlarmsTopic")
        api_id, _ = default_synth.resource("AWS::ApiGatewayV2::Api", API)
        function_id, _ = default_synth.resource("AWS::Lambda::Function", f"{API}Function")
        alarms = {
            k: v["Properties"]
            for k, v in default_synth.resources("AWS::CloudWatch::Alarm").items()
            if k.startswith(API)
        }
        found = {(a["Namespace"], a["MetricName"]): a for a in alarms.values() if "Namespace" in a}
        assert set(found) == {
            ("AWS/ApiGateway", "5xx"),
            ("AWS/Lambda", "Errors"),
            ("AWS/Lambda", "Throttles"),
        }
        assert found["AWS/ApiGateway", "5xx"]["Dimensions"] == [
            {"Name": "ApiId", "Value": {"Ref": api_id}}
        ]
        for key in (("AWS/Lambda", "Errors"), ("AWS/Lambda", "Throttles")):
            assert found[key]["Dimensions"] == [
                {"Name": "FunctionName", "Value": {"Ref": function_id}}
            ]
        for alarm in found.values():
            assert (alarm["Threshold"], alarm["Statistic"]) == (1, "Sum")
        # The fourth: started minus finished in the API's scope (test_topic.py checks its shape).
        (unfinished,) = [a for a in alarms.values() if "Metrics" in a]
        scopes = {
            d["Value"]
            for m in unfinished["Metrics"]
            if "MetricStat" in m
            for d in m["MetricStat"]["Metric"]["Dimensions"]
        }
        assert scopes == {"payments-api"}
        for alarm in alarms.values():
            assert alarm["AlarmActions"] == alarm["OKActions"] == [{"Ref": topic_id}]

    def test_outputs(self, default_synth: Synth) -> None:
        outputs = default_synth.template["Outputs"]
        assert set(outputs) >= API_OUTPUTS
        api_id, _ = default_synth.resource("AWS::ApiGatewayV2::Api", API)
        function_id, _ = default_synth.resource("AWS::Lambda::Function", f"{API}Function")
        assert outputs[f"{API}ApiId"]["Value"] == {"Ref": api_id}
        assert outputs[f"{API}FunctionName"]["Value"] == {"Ref": function_id}
        url = outputs[f"{API}Url"]["Value"]["Fn::Join"][1]
        assert (url[0], url[1], url[2], url[-1]) == (
            "https://",
            {"Ref": api_id},
            ".execute-api.",
            "/",
        )

    def test_dashboard_has_the_api_row(self, default_synth: Synth) -> None:
        (dashboard,) = default_synth.resources("AWS::CloudWatch::Dashboard").values()
        body = json.dumps(dashboard["Properties"]["DashboardBody"])
        for text in (
            f"{API} requests",
            f"{API} latency",
            f"{API} function",
            f"{API} started minus finished",
            "5xx",
            "4xx",
        ):
            assert text in body, text

    def test_nag_clean_with_the_api(self, default_synth: Synth) -> None:
        """The session fixture synthesizes with AwsSolutions on; the API is part of it."""
        assert default_synth.resources("AWS::ApiGatewayV2::Route")
        assert nag_violations(default_synth.template_path.parent) == []


class TestLocalStack:
    """moto's CloudFormation has no ApiGatewayV2 models: the local stack leaves the API out."""

    def test_no_api_resources_but_the_function(self, local_synth: Synth) -> None:
        types = {r["Type"] for r in local_synth.template["Resources"].values()}
        assert not {t for t in types if t.startswith("AWS::ApiGatewayV2::")}
        assert not [
            p
            for p in local_synth.resources("AWS::Lambda::Permission").values()
            if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
        ]
        env = local_synth.props("AWS::Lambda::Function", f"{API}Function")["Environment"]
        assert env["Variables"]["API_SCOPE"] == "payments-api"

    def test_only_the_function_name_output(self, local_synth: Synth) -> None:
        outputs = set(local_synth.template["Outputs"])
        assert f"{API}FunctionName" in outputs
        assert not {f"{API}Url", f"{API}ApiId"} & outputs

    def test_function_alarms_only(self, local_synth: Synth) -> None:
        names = {
            a["Properties"].get("MetricName", "unfinished work")
            for k, a in local_synth.resources("AWS::CloudWatch::Alarm").items()
            if k.startswith(API)
        }
        assert names == {"Errors", "Throttles", "unfinished work"}


class TestConstruct:
    def test_exported_lazily(self) -> None:
        import exactly_once_cdk

        assert "IdempotentHttpApi" in exactly_once_cdk.__all__
        assert exactly_once_cdk.IdempotentHttpApi is IdempotentHttpApi

    @pytest.mark.parametrize("seconds", [30, 60])
    def test_timeout_must_be_under_the_integration_limit(self, seconds: int) -> None:
        stack, table, layer = probe_stack()
        with pytest.raises(ValueError, match="under API Gateway's 30 s integration limit"):
            IdempotentHttpApi(
                stack,
                "Api",
                code=INLINE,
                table=table,
                layer=layer,
                timeout=Duration.seconds(seconds),
            )

    def test_needs_a_route(self) -> None:
        stack, table, layer = probe_stack()
        with pytest.raises(ValueError, match="at least one"):
            IdempotentHttpApi(stack, "Api", code=INLINE, table=table, layer=layer, routes=())

    def test_defaults_and_overrides(self) -> None:
        """Several routes, no ledger, own scope, props overrides, grant_invoke, no outputs."""
        stack, table, layer = probe_stack()
        api = IdempotentHttpApi(
            stack,
            "Orders",
            code=INLINE,
            table=table,
            layer=layer,
            routes=(("post", "/orders"), ("PATCH", "/orders/{id}")),
            idempotency_scope="orders-http",
            throttling_rate_limit=5,
            throttling_burst_limit=10,
            environment={"EXTRA": "1"},
            outputs=False,
            api_props={"api_name": "orders-api"},
            stage_props={"detailed_metrics_enabled": True},
        )
        caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
        api.grant_invoke(caller)
        ExactlyOnceDashboard(stack, "Dashboard", consumers=[], apis=[api])
        template = Template.from_stack(stack).to_json()

        routes = resources(template, "AWS::ApiGatewayV2::Route").values()
        assert sorted(r["Properties"]["RouteKey"] for r in routes) == [
            "PATCH /orders/{id}",
            "POST /orders",
        ]
        assert {r["Properties"]["AuthorizationType"] for r in routes} == {"AWS_IAM"}
        assert len(resources(template, "AWS::ApiGatewayV2::Integration")) == 1
        (stage,) = resources(template, "AWS::ApiGatewayV2::Stage").values()
        assert stage["Properties"]["DefaultRouteSettings"] == {
            "DetailedMetricsEnabled": True,
            "ThrottlingRateLimit": 5,
            "ThrottlingBurstLimit": 10,
        }
        (http_api,) = resources(template, "AWS::ApiGatewayV2::Api").values()
        assert http_api["Properties"]["Name"] == "orders-api"
        (function,) = resources(template, "AWS::Lambda::Function").values()
        variables = function["Properties"]["Environment"]["Variables"]
        assert "LEDGER_TABLE" not in variables
        assert (variables["API_SCOPE"], variables["EXTRA"]) == ("orders-http", "1")
        policies = resources(template, "AWS::IAM::Policy").values()
        sids = {
            s.get("Sid") for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]
        }
        assert "LedgerAppend" not in sids
        invoke = [
            s
            for p in policies
            for s in p["Properties"]["PolicyDocument"]["Statement"]
            if s["Action"] == "execute-api:Invoke"
        ]
        # One statement per route, each on this API's id and that route's method and path.
        api_id = next(iter(resources(template, "AWS::ApiGatewayV2::Api")))
        tails = sorted(s["Resource"]["Fn::Join"][1][-1] for s in invoke)
        assert tails == ["/*/PATCH/orders/*", "/*/POST/orders"]
        assert all({"Ref": api_id} in s["Resource"]["Fn::Join"][1] for s in invoke)
        assert set(template["Outputs"]) == {"IdempotencyTableName"}  # the table's own
        assert api.url is not None
        assert api.api is not None

    def test_ledger_and_blocking(self) -> None:
        stack, table, layer = probe_stack()
        ledger = LedgerTable(stack, "Ledger")
        IdempotentHttpApi(
            stack,
            "Pay",
            code=INLINE,
            table=table,
            layer=layer,
            ledger=ledger,
            block_expired_leases=True,
            lease_margin=Duration.seconds(2),
            metrics_namespace="Shop",
        )
        template = Template.from_stack(stack).to_json()
        (function,) = resources(template, "AWS::Lambda::Function").values()
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["BLOCK_EXPIRED_LEASES"] == "true"
        assert variables["LEASE_MARGIN_MS"] == "2000"
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Shop"
        assert variables["API_SCOPE"] == "pay"
        assert "LEDGER_TABLE" in variables
        assert set(template["Outputs"]) >= {"PayUrl", "PayApiId", "PayFunctionName"}

    def test_without_api(self) -> None:
        stack, table, layer = probe_stack()
        api = IdempotentHttpApi(
            stack, "Pay", code=INLINE, table=table, layer=layer, create_api=False
        )
        template = Template.from_stack(stack).to_json()
        assert not [t for t in template["Resources"].values() if "ApiGatewayV2" in t["Type"]]
        assert set(template["Outputs"]) == {"PayFunctionName", "IdempotencyTableName"}
        assert (api.api, api.stage, api.url, api.routes) == (None, None, None, [])
        assert len(api.alarms) == 3  # errors, throttles, started minus finished
        assert len(api.dashboard_widgets()) == 2  # the function, started minus finished

    def test_nag_refuses_an_open_unlogged_api_and_passes_the_default(self, tmp_path: Path) -> None:
        """Whoever swaps the IAM authorizer or drops the access logs must acknowledge it."""
        app = App(outdir=str(tmp_path))
        stack, table, layer = probe_stack(app)
        IdempotentHttpApi(stack, "Closed", code=INLINE, table=table, layer=layer)
        IdempotentHttpApi(
            stack,
            "Open",
            code=INLINE,
            table=table,
            layer=layer,
            authorizer=apigwv2.HttpNoneAuthorizer(),
            stage_props={"access_log_settings": None},
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
        assert paths == {("AwsSolutions-APIG4", "Open"), ("AwsSolutions-APIG1", "Open")}
