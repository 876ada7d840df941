"""A CDK app outside this repository, built from the installed constructs only.

The app lives in a temporary folder with its own handler; it runs as `python app.py` with the dev
venv's interpreter, no PYTHONPATH, cwd in that folder, and cdk-nag's AwsSolutions checks on (any
unacknowledged finding fails synthesis). None of infra/, app.py or cdk.json of this repo is used.
One layer build folder is shared by every app of the session, so pip runs once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.packaging.support import DEV_BIN, PACKAGE_SOURCES, clean_env, relative_files, run

STACK = "ShopStack"
HANDLER = '''\
"""One effect per order id, whatever SQS redelivers."""

from typing import Any

from exactly_once import RecordContext, sqs_consumer


@sqs_consumer(key="id")
def handle(body: dict[str, Any], ctx: RecordContext) -> dict[str, Any]:
    return {"id": ctx.key, "attempt": ctx.attempt}
'''
# __OPTIONS__ becomes the consumer's extra keywords; __LAYER_DIR__ the shared layer build folder.
APP = """\
from pathlib import Path

from aws_cdk import App, Duration, Size, Stack, Validations
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks
from exactly_once_cdk import (
    AlarmTopic, ExactlyOnceLayer, FunctionOptions, IdempotencyTable, IdempotentConsumer,
    IdempotentHttpApi, StuckLockMonitor,
)

app = App()
stack = Stack(app, "ShopStack")
table = IdempotencyTable(stack, "Idempotency")
layer = ExactlyOnceLayer(stack, "Layer", build_dir=Path(__LAYER_DIR__))
alarms = AlarmTopic(stack, "Alarms")
IdempotentConsumer(
    stack, "Orders", code=lambda_.Code.from_asset("handler"), table=table, layer=layer,
    alarm_topic=alarms.topic, **__OPTIONS__
)
StuckLockMonitor(stack, "Monitor", table=table, layer=layer, alarm_topic=alarms.topic)
IdempotentHttpApi(
    stack, "Checkout", code=lambda_.Code.from_asset("handler"), table=table, layer=layer,
    routes=[("POST", "/checkouts")], alarm_topic=alarms.topic,
)
Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
"""
OVERRIDES = """dict(
    fifo=True,
    batch_size=5,
    max_receive_count=3,
    queue_props={"retention_period": Duration.days(7), "queue_name": "shop-orders.fifo"},
    dead_letter_queue_props={
        "encryption": sqs.QueueEncryption.KMS,
        "encryption_master_key": kms.Key(stack, "DlqKey", enable_key_rotation=True),
    },
    function_options=FunctionOptions(
        function_props={
            "ephemeral_storage_size": Size.mebibytes(1024),
            "environment": {"SHOP_MODE": "test"},
        }
    ),
    metrics_namespace="Shop",
)"""
# The SNS side: a topic fanning out to a consumer's queue, and a direct subscriber.
TOPIC_APP = """\
from pathlib import Path

from aws_cdk import App, Stack, Validations
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks
from exactly_once_cdk import (
    AlarmTopic, ExactlyOnceDashboard, ExactlyOnceLayer, IdempotencyTable, IdempotentConsumer,
    IdempotentSubscriber, IdempotentTopic,
)

app = App()
stack = Stack(app, "ShopStack")
table = IdempotencyTable(stack, "Idempotency")
layer = ExactlyOnceLayer(stack, "Layer", build_dir=Path(__LAYER_DIR__))
alarms = AlarmTopic(stack, "Alarms")
code = lambda_.Code.from_asset("handler")
orders = IdempotentConsumer(
    stack, "Orders", code=code, table=table, layer=layer, alarm_topic=alarms.topic
)
sales = IdempotentTopic(stack, "Sales", alarm_topic=alarms.topic)
sales.subscribe_queue(orders, raw_message_delivery=True)
counter = IdempotentSubscriber(
    stack, "Counter", topic=sales.topic, code=code, table=table, layer=layer,
    alarm_topic=alarms.topic, retry_attempts=1,
)
ExactlyOnceDashboard(stack, "Dashboard", consumers=[orders], topics=[sales], subscribers=[counter])
Validations.of(app).add_plugins(AwsSolutionsChecks(app))
app.synth()
"""
# The escape hatch can weaken a default; nag must then refuse the app.
INSECURE = """dict(
    queue_props={"encryption": sqs.QueueEncryption.UNENCRYPTED, "enforce_ssl": False},
)"""
# Invalid settings must fail at construction with the rule in words; the last case is valid.
PROBE = """\
import json

from aws_cdk import App, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from exactly_once_cdk import FunctionOptions, IdempotencyTable, IdempotentConsumer

CASES = {
    "fifo_batch_50": dict(fifo=True, batch_size=50),
    "fifo_window": dict(fifo=True, batching_window=Duration.seconds(5)),
    "batch_50_no_window": dict(batch_size=50),
    "fifo_batch_10": dict(fifo=True, batch_size=10),
    "short_visibility": dict(queue_props={"visibility_timeout": Duration.seconds(60)}),
    "long_visibility": dict(queue_props={"visibility_timeout": Duration.seconds(600)}),
    "function_role": dict(function_options=FunctionOptions(function_props={"role": None})),
}
found = {}
for name, options in CASES.items():
    stack = Stack(App(), "Probe")
    table = IdempotencyTable(stack, "Idempotency")
    layer = lambda_.LayerVersion.from_layer_version_arn(
        stack, "Layer", "arn:aws:lambda:us-east-1:123456789012:layer:probe:1"
    )
    try:
        IdempotentConsumer(
            stack, "Orders", code=lambda_.Code.from_asset("handler"), table=table, layer=layer,
            **options,
        )
        found[name] = None
    except ValueError as exc:
        found[name] = str(exc)
print(json.dumps(found))
"""


@dataclass(frozen=True)
class Project:
    root: Path
    layer_dir: Path

    def write_app(self, name: str, options: str, source: str = APP) -> Path:
        source = source.replace("__LAYER_DIR__", repr(str(self.layer_dir)))
        path = self.root / name
        path.write_text(source.replace("__OPTIONS__", options))
        return path

    def synth(self, script: Path, outdir: Path, *, check: bool = True) -> Synth:
        result = run(
            [DEV_BIN / "python", script.name],
            cwd=self.root,
            env=clean_env(
                CDK_OUTDIR=str(outdir), JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20"
            ),
            check=check,
        )
        return Synth(outdir, result.returncode, result.stdout + result.stderr)


@dataclass(frozen=True)
class Synth:
    outdir: Path
    returncode: int
    output: str

    @property
    def template(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((self.outdir / f"{STACK}.template.json").read_text())
        return loaded

    def nag_violations(self) -> list[str]:
        report = self.outdir / "validation-report.json"
        if not report.exists():
            return []
        return [
            violation["ruleName"]
            for plugin in json.loads(report.read_text())["pluginReports"]
            for violation in plugin["violations"]
        ]

    def asset_dir(self, s3_key: str) -> Path:
        """The cdk.out folder of the asset a `Code` property names by its S3 key."""
        assets = json.loads((self.outdir / f"{STACK}.assets.json").read_text())
        path: str = assets["files"][s3_key.removesuffix(".zip")]["source"]["path"]
        return self.outdir / path


class Resources:
    def __init__(self, template: dict[str, Any]) -> None:
        self.all: dict[str, dict[str, Any]] = template["Resources"]
        self.outputs: dict[str, dict[str, Any]] = template.get("Outputs", {})

    def of_type(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.all.items() if v["Type"] == type_}

    def one(self, type_: str, prefix: str = "") -> tuple[str, dict[str, Any]]:
        found = [(k, v) for k, v in self.of_type(type_).items() if k.startswith(prefix)]
        assert len(found) == 1, f"{type_} {prefix}: {[k for k, _ in found]}"
        return found[0]

    def queues(self) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
        """(source queue, dead-letter queue): the source is the one with a redrive policy."""
        queues = self.of_type("AWS::SQS::Queue")
        assert len(queues) == 2, list(queues)
        (source,) = [(k, v) for k, v in queues.items() if "RedrivePolicy" in v["Properties"]]
        (dlq,) = [(k, v) for k, v in queues.items() if k != source[0]]
        return source, dlq


def statements(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    found = document["Statement"]
    yield from found if isinstance(found, list) else [found]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


# --- fixtures: each app synthesizes once per session -------------------------------------------


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    root = tmp_path_factory.mktemp("external-app")
    (root / "handler").mkdir()
    (root / "handler" / "handler.py").write_text(HANDLER)
    (root / "probe.py").write_text(PROBE)
    return Project(root=root, layer_dir=tmp_path_factory.mktemp("layer-cache") / "layer")


@pytest.fixture(scope="session")
def default_synth(project: Project) -> Synth:
    return project.synth(project.write_app("app.py", "{}"), project.root / "cdk.out")


@pytest.fixture(scope="session")
def default(default_synth: Synth) -> Resources:
    return Resources(default_synth.template)


@pytest.fixture(scope="session")
def overridden(project: Project) -> Resources:
    synth = project.synth(
        project.write_app("app_overrides.py", OVERRIDES), project.root / "cdk.out.overrides"
    )
    assert synth.nag_violations() == []
    return Resources(synth.template)


# --- the default app ---------------------------------------------------------------------------


def test_synthesis_is_nag_clean(default_synth: Synth) -> None:
    assert default_synth.returncode == 0
    assert "AwsSolutions" not in default_synth.output, default_synth.output
    assert "ERROR" not in default_synth.output, default_synth.output
    assert default_synth.nag_violations() == []


def test_nag_is_active_in_the_external_app(project: Project, default_synth: Synth) -> None:
    """Without this, a clean run could mean the plugin never ran. Runs after the default app,
    so the layer is already built."""
    synth = project.synth(
        project.write_app("app_insecure.py", INSECURE),
        project.root / "cdk.out.insecure",
        check=False,
    )
    assert synth.returncode != 0
    assert "ValidationFailed" in synth.output
    assert {"AwsSolutions-SQS2", "AwsSolutions-SQS4"} <= set(synth.nag_violations())
    assert "AwsSolutions-SQS4" in synth.output


def test_queue_and_dead_letter_queue(default: Resources) -> None:
    (_, queue), (dlq_id, dlq) = default.queues()
    for props in (queue["Properties"], dlq["Properties"]):
        assert props["SqsManagedSseEnabled"] is True
        assert "KmsMasterKeyId" not in props
        assert "FifoQueue" not in props
    assert queue["Properties"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": 5,
    }
    assert queue["Properties"]["VisibilityTimeout"] == 6 * 30
    assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert dlq["Properties"]["RedriveAllowPolicy"]["redrivePermission"] == "byQueue"


def test_both_queues_refuse_requests_without_tls(default: Resources) -> None:
    policies = default.of_type("AWS::SQS::QueuePolicy").values()
    for queue_id, _ in default.queues():
        (policy,) = [p for p in policies if p["Properties"]["Queues"] == [{"Ref": queue_id}]]
        (deny,) = statements(policy["Properties"]["PolicyDocument"])
        assert deny["Effect"] == "Deny"
        assert deny["Action"] == "sqs:*"
        assert deny["Principal"] == {"AWS": "*"}
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        assert deny["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_function(default: Resources) -> None:
    (_, _), (dlq_id, _) = default.queues()
    table_id, _ = default.one("AWS::DynamoDB::Table")
    layer_id, _ = default.one("AWS::Lambda::LayerVersion")
    _, function = default.one("AWS::Lambda::Function", "Orders")
    props = function["Properties"]
    assert props["Runtime"] == "python3.13"
    assert props["Architectures"] == ["arm64"]
    assert props["Handler"] == "handler.handle"
    assert props["Layers"] == [{"Ref": layer_id}]
    assert props["Timeout"] == 30
    variables = props["Environment"]["Variables"]
    assert variables["IDEMPOTENCY_TABLE"] == {"Ref": table_id}
    assert variables["DEAD_LETTER_QUEUE_URL"] == {"Ref": dlq_id}
    assert variables["CONSUMER_SCOPE"] == "orders"


def test_event_source_mapping(default: Resources) -> None:
    (queue_id, _), _ = default.queues()
    function_id, _ = default.one("AWS::Lambda::Function", "Orders")
    _, mapping = default.one("AWS::Lambda::EventSourceMapping")
    props = mapping["Properties"]
    assert props["EventSourceArn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    assert props["FunctionName"] == {"Ref": function_id}
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["Enabled"] is True
    assert props["BatchSize"] == 10


def test_table(default: Resources) -> None:
    _, table = default.one("AWS::DynamoDB::Table")
    props = table["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"]["SSEEnabled"] is True
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["DeletionProtectionEnabled"] is True
    assert table["DeletionPolicy"] == "Retain"
    assert table["UpdateReplacePolicy"] == "Retain"


def test_function_role_is_least_privilege(default: Resources) -> None:
    _, function = default.one("AWS::Lambda::Function", "Orders")
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    role = default.all[role_id]["Properties"]
    assert "ManagedPolicyArns" not in role
    assert "Policies" not in role
    attached = [
        p["Properties"]
        for p in default.of_type("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    assert attached
    actions: set[str] = set()
    for policy in attached:
        for statement in statements(policy["PolicyDocument"]):
            assert statement["Effect"] == "Allow"
            assert "*" not in as_list(statement["Resource"]), statement
            actions.update(as_list(statement["Action"]))
    assert not [a for a in actions if "*" in a]
    assert actions == {
        "logs:CreateLogStream",
        "logs:PutLogEvents",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",  # DeleteItem is never called (tests/infra/test_record_actions.py)
        "dynamodb:PartiQLInsert",  # a batch's statements (acquire_many, finish_many)
        "dynamodb:PartiQLUpdate",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:GetQueueAttributes",
        "sqs:ChangeMessageVisibility",
        "sqs:SendMessage",
    }


def test_outputs_name_the_consumer(default: Resources) -> None:
    (queue_id, _), (dlq_id, _) = default.queues()
    function_id, _ = default.one("AWS::Lambda::Function", "Orders")
    assert default.outputs["OrdersQueueUrl"]["Value"] == {"Ref": queue_id}
    assert default.outputs["OrdersDeadLetterQueueUrl"]["Value"] == {"Ref": dlq_id}
    assert default.outputs["OrdersFunctionName"]["Value"] == {"Ref": function_id}


def test_http_api(default: Resources) -> None:
    """IAM on the route, the `$default` stage throttled and logged, the outputs named."""
    api_id, _ = default.one("AWS::ApiGatewayV2::Api")
    function_id, _ = default.one("AWS::Lambda::Function", "Checkout")
    _, route = default.one("AWS::ApiGatewayV2::Route")
    assert route["Properties"]["RouteKey"] == "POST /checkouts"
    assert route["Properties"]["AuthorizationType"] == "AWS_IAM"
    _, stage = default.one("AWS::ApiGatewayV2::Stage")
    assert stage["Properties"]["StageName"] == "$default"
    assert set(stage["Properties"]["DefaultRouteSettings"]) == {
        "ThrottlingRateLimit",
        "ThrottlingBurstLimit",
    }
    assert "$context.requestId" in stage["Properties"]["AccessLogSettings"]["Format"]
    assert default.outputs["CheckoutApiId"]["Value"] == {"Ref": api_id}
    assert default.outputs["CheckoutFunctionName"]["Value"] == {"Ref": function_id}
    assert "CheckoutUrl" in default.outputs
    _, function = default.one("AWS::Lambda::Function", "Checkout")
    assert function["Properties"]["Environment"]["Variables"]["API_SCOPE"] == "checkout"
    assert function["Properties"]["Timeout"] == 29


def test_alarms_notify_the_topic(default: Resources) -> None:
    topic_id, _ = default.one("AWS::SNS::Topic")
    alarms = default.of_type("AWS::CloudWatch::Alarm")
    # The consumer's six, the monitor's three and the HTTP API's four (each entry point's
    # function: errors, throttles, started minus finished).
    assert len(alarms) == 6 + 3 + 4, list(alarms)
    for alarm in alarms.values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic_id}]
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic_id}]
    _, monitor = default.one("AWS::Lambda::Function", "Monitor")
    assert monitor["Properties"]["Handler"] == "handler.handle"


def test_assets_make_a_working_function(default_synth: Synth, default: Resources) -> None:
    """The layer asset holds the installed `exactly_once` (minus py.typed) and Powertools; the
    function asset is our handler; together, as Lambda lays them out, the handler imports."""
    _, layer = default.one("AWS::Lambda::LayerVersion")
    layer_dir = default_synth.asset_dir(layer["Properties"]["Content"]["S3Key"]) / "python"
    source = PACKAGE_SOURCES["exactly_once"]
    packaged = layer_dir / "exactly_once"
    assert relative_files(packaged) == relative_files(source) - {"py.typed"}
    for name in relative_files(packaged):
        assert (packaged / name).read_bytes() == (source / name).read_bytes(), name
    assert (layer_dir / "aws_lambda_powertools" / "__init__.py").is_file()

    _, function = default.one("AWS::Lambda::Function", "Orders")
    code_dir = default_synth.asset_dir(function["Properties"]["Code"]["S3Key"])
    assert relative_files(code_dir) == {"handler.py"}
    # /var/task first, then the layer's /opt/python; the interpreter's boto3 stands in for the
    # runtime's. -I keeps PYTHONPATH and the cwd out.
    found = run(
        [
            DEV_BIN / "python",
            "-I",
            "-c",
            "import json, sys\n"
            f"sys.path[:0] = [{str(code_dir)!r}, {str(layer_dir)!r}]\n"
            "import exactly_once, handler\n"
            "print(json.dumps({'package': exactly_once.__file__,"
            " 'handler': type(handler.handle).__name__}))",
        ],
        cwd=default_synth.outdir,
    ).stdout
    loaded = json.loads(found)
    assert Path(loaded["package"]).is_relative_to(layer_dir)
    assert loaded["handler"] == "SqsConsumer"


def test_topic_and_subscriber(project: Project, default_synth: Synth) -> None:
    """The SNS constructs from the installed package: nag clean, the queue subscribed (raw),
    the subscriber with its redrive policy, async config and outputs. Runs after the default
    app, so the layer is already built."""
    synth = project.synth(
        project.write_app("app_topic.py", "{}", TOPIC_APP), project.root / "cdk.out.topic"
    )
    assert synth.returncode == 0
    assert synth.nag_violations() == []
    found = Resources(synth.template)
    topic_id, _ = found.one("AWS::SNS::Topic", "Sales")
    by_protocol = {
        s["Properties"]["Protocol"]: s["Properties"]
        for s in found.of_type("AWS::SNS::Subscription").values()
    }
    assert set(by_protocol) == {"sqs", "lambda"}
    assert by_protocol["sqs"]["RawMessageDelivery"] is True
    dlq_id, _ = found.one("AWS::SQS::Queue", "CounterDeadLetterQueue")
    assert by_protocol["lambda"]["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]}
    }
    assert {s["TopicArn"]["Ref"] for s in by_protocol.values()} == {topic_id}
    _, config = found.one("AWS::Lambda::EventInvokeConfig")
    assert config["Properties"]["MaximumRetryAttempts"] == 1
    _, function = found.one("AWS::Lambda::Function", "Counter")
    assert function["Properties"]["Environment"]["Variables"]["SUBSCRIBER_SCOPE"] == "counter"
    assert {
        "SalesTopicArn",
        "CounterFunctionName",
        "CounterDeadLetterQueueUrl",
        "CounterDeadLetterQueueArn",
    } <= set(found.outputs)
    # The consumer's six, the topic's one, the subscriber's six.
    assert len(found.of_type("AWS::CloudWatch::Alarm")) == 6 + 1 + 6


# --- overrides and invalid settings ------------------------------------------------------------


def test_overrides_reach_the_template(overridden: Resources) -> None:
    (_, queue), (_, dlq) = overridden.queues()
    for props in (queue["Properties"], dlq["Properties"]):
        assert props["FifoQueue"] is True
        assert props["QueueName"].endswith(".fifo")
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    assert queue["Properties"]["QueueName"] == "shop-orders.fifo"
    # The DLQ's redrive allow policy names the renamed source queue, not the default name.
    allowed = json.dumps(dlq["Properties"]["RedriveAllowPolicy"]["sourceQueueArns"])
    assert ":shop-orders.fifo" in allowed
    # A customer-managed DLQ key: the function may use it to send permanent failures there.
    key_id, _ = overridden.one("AWS::KMS::Key", "DlqKey")
    assert dlq["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    kms_actions = {
        action
        for _, policy in overridden.of_type("AWS::IAM::Policy").items()
        for statement in statements(policy["Properties"]["PolicyDocument"])
        if statement.get("Resource") == {"Fn::GetAtt": [key_id, "Arn"]}
        for action in as_list(statement["Action"])
    }
    assert kms_actions == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert queue["Properties"]["RedrivePolicy"]["maxReceiveCount"] == 3
    # queue_props reaches the source queue only; the DLQ keeps its 14 days.
    assert queue["Properties"]["MessageRetentionPeriod"] == 7 * 24 * 3600
    assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    _, mapping = overridden.one("AWS::Lambda::EventSourceMapping")
    assert mapping["Properties"]["BatchSize"] == 5
    assert "MaximumBatchingWindowInSeconds" not in mapping["Properties"]  # none on FIFO
    _, function = overridden.one("AWS::Lambda::Function", "Orders")
    assert function["Properties"]["EphemeralStorage"] == {"Size": 1024}
    # `environment` in function_props adds to the construct's variables, never replaces them.
    variables = function["Properties"]["Environment"]["Variables"]
    assert variables["SHOP_MODE"] == "test"
    assert {"IDEMPOTENCY_TABLE", "DEAD_LETTER_QUEUE_URL", "CONSUMER_SCOPE"} <= set(variables)
    assert variables["POWERTOOLS_METRICS_NAMESPACE"] == "Shop"
    # The escape hatch adds to the defaults, it does not replace them.
    assert function["Properties"]["Runtime"] == "python3.13"


def test_invalid_settings_fail_with_the_rule(project: Project) -> None:
    result = run([DEV_BIN / "python", "probe.py"], cwd=project.root)
    assert json.loads(result.stdout) == {
        "fifo_batch_50": "Orders: a FIFO event source takes at most 10 messages a batch",
        "fifo_window": "Orders: FIFO queues have no batching window",
        "batch_50_no_window": "Orders: batches over 10 need a batching window of 1 s or more",
        "fifo_batch_10": None,
        "short_visibility": "queue_props visibility_timeout 60 s is under 180 s "
        "(six function timeouts plus the batching window)",
        "long_visibility": None,
        "function_role": "function_props cannot set ['role']: the construct grants, logs and "
        "times out through them (use the construct's own keywords, or `environment` to add "
        "variables)",
    }
