"""The embedded local AWS: moto for SQS/SNS/CloudFormation/Lambda metadata, DynamoDB Local for
tables, and (`postgres=`) a PostgreSQL server for the idempotency store.

The CDK app is deployed into moto as it would be into an account, and what runs locally is
read from that deployment (`local_aws.cloud_assembly`: the assembly's template and the stack's
resources), never from this repository's own registries. The stack's tables are then
mirrored into DynamoDB Local and every consumer's DynamoDB calls go there, because moto's
conditional writes are not atomic under concurrency and exactly-once depends on them. With a
PostgreSQL store, every function's bindings select it (`IDEMPOTENCY_DSN` instead of the table,
which the CDK app deploys because it cannot deploy PostgreSQL into moto), and the effects ledger
the reports read is PostgreSQL's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import boto3

from exactly_once_cdk.outputs import LOCAL_DYNAMODB_CONTEXT
from exactly_once_ops.app_model import DeployedApp
from exactly_once_ops.handlers import deployed_environment
from local_aws.api_server import ApiBinding, discover_api_bindings
from local_aws.app_source import AppSource
from local_aws.cloud_assembly import read_assembly
from local_aws.demo import DynamoLedger, LedgerReader
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.lifecycle import Lifecycle
from local_aws.local_deploy import Deployment, deploy
from local_aws.local_postgres import LocalPostgres
from local_aws.moto_server import REGION, MotoServer, aws_env
from local_aws.pg_ledger import PostgresLedger
from local_aws.poller import FunctionBinding
from local_aws.sns_delivery import RetryPolicy, SubscriberBinding
from local_aws.sns_tap import discover_subscriber_bindings
from local_aws.store_environment import on_postgres
from local_aws.stream_bindings import StreamBinding, discover_stream_bindings, stream_consumers

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient

Binding = TypeVar("Binding", FunctionBinding, ApiBinding, SubscriberBinding, StreamBinding)

# Short function timeouts keep the demo's redelivery waits (6x the timeout) to seconds.
LOCAL_CONTEXT: dict[str, Any] = {"functionTimeoutSeconds": 3, "batchingWindowSeconds": 0}


def mirror_table(source: DynamoDBClient, target: DynamoDBClient, name: str) -> None:
    """Create `name` in target with the key schema, indexes and stream it has in source (a
    table stream's consumer reads DynamoDB Local's stream: the functions write the items
    there)."""
    table = source.describe_table(TableName=name)["Table"]
    params: dict[str, Any] = {
        "TableName": name,
        "KeySchema": table["KeySchema"],
        "AttributeDefinitions": table["AttributeDefinitions"],
        "BillingMode": "PAY_PER_REQUEST",
    }
    indexes = [
        {
            "IndexName": gsi["IndexName"],
            "KeySchema": gsi["KeySchema"],
            "Projection": gsi["Projection"],
        }
        for gsi in table.get("GlobalSecondaryIndexes", [])
    ]
    if indexes:
        params["GlobalSecondaryIndexes"] = indexes
    stream: dict[str, Any] = dict(table.get("StreamSpecification") or {})
    if stream.get("StreamEnabled"):
        params["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": stream.get("StreamViewType", "NEW_AND_OLD_IMAGES"),
        }
    target.create_table(**params)
    target.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1})


@dataclass
class LocalStack(Lifecycle):
    """Start with `with LocalStack() as stack:`; `stack.outputs` are the deployed stack's."""

    context: dict[str, Any] = field(default_factory=dict)
    moto: MotoServer = field(default_factory=MotoServer)
    dynamodb: DynamoDBLocal = field(default_factory=DynamoDBLocal)
    postgres: LocalPostgres | None = None  # the idempotency store when set, else the table
    outputs: dict[str, str] = field(default_factory=dict)
    work_dir: Path | None = None  # where the deployment's assembly goes (default build/)
    source: AppSource | None = None  # the CDK app (default: this checkout's, else the cwd's)
    deployment: Deployment | None = field(default=None, repr=False)
    _app: DeployedApp | None = field(default=None, repr=False)
    _subscribers: list[SubscriberBinding] | None = field(default=None, repr=False)

    def start(self) -> LocalStack:
        try:  # a stop (SIGTERM) may come while any of these runs: stop what did start
            self.moto.start()
            self.dynamodb.start()
            # The tables live in DynamoDB Local, not in moto: the stack says where, so a CLI
            # reading its outputs never answers from moto's empty copies.
            context = {LOCAL_DYNAMODB_CONTEXT: self.dynamodb.endpoint, **self.context}
            self.deployment = deploy(
                self.moto.endpoint,
                {**LOCAL_CONTEXT, **context},
                app=self.source,
                work_dir=self.work_dir,
            )
            self.outputs = dict(self.deployment.outputs)
            self._app = read_assembly(
                self.deployment.assembly_dir, self.deployment.stack_name
            ).bind(self.client("cloudformation"))
            # Every table of the stack (the store's, the ledger's, the app's own), by the
            # names the deployment gave them: the functions' DynamoDB calls all go there.
            for table in self._app.tables:
                mirror_table(
                    self.client("dynamodb", via_moto=True),
                    self.client("dynamodb"),
                    self._app.physical_id(table),
                )
            if self.postgres is not None:
                self.postgres.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.postgres is not None:
            self.postgres.stop()
        self.dynamodb.stop()
        self.moto.stop()
        if self.deployment is not None:  # the functions' code: gone once nothing runs it
            self.deployment.remove()

    @property
    def store(self) -> str:
        """The idempotency store the functions use: "dynamodb" or "postgres"."""
        return "dynamodb" if self.postgres is None else "postgres"

    def ledger(self) -> LedgerReader:
        """Where the examples' effects are: the ledger table, or PostgreSQL's on that store."""
        if self.postgres is not None:
            return PostgresLedger(self.postgres.dsn)
        return DynamoLedger(self.ddb(), self.outputs["LedgerTableName"])

    def _on_store(self, bindings: list[Binding]) -> list[Binding]:
        """The bindings as the functions run here: on PostgreSQL, with its DSN for the table."""
        if self.postgres is None:
            return bindings
        dsn = self.postgres.dsn
        return [replace(b, environment=on_postgres(b.environment, dsn)) for b in bindings]

    @property
    def app(self) -> DeployedApp:
        """What the deployed stack runs: its consumers, APIs, topics and subscribers."""
        if self._app is None:
            raise RuntimeError("the local stack is not started: nothing is deployed yet")
        return self._app

    @property
    def stack_name(self) -> str:
        """The deployed stack's name (the `stackName` context's, or the app's own)."""
        return self.app.stack_name

    @property
    def aws_environment(self) -> dict[str, str]:
        """Variables that send everything to moto, except DynamoDB, which goes to DynamoDB Local."""
        return {**aws_env(self.moto.endpoint), "AWS_ENDPOINT_URL_DYNAMODB": self.dynamodb.endpoint}

    def client(self, service: str, *, via_moto: bool = False) -> Any:
        endpoint = (
            self.dynamodb.endpoint if service == "dynamodb" and not via_moto else self.moto.endpoint
        )
        return boto3.client(
            service,  # type: ignore[call-overload]
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 (moto and DynamoDB Local accept any)
        )

    def sqs(self) -> SQSClient:
        return self.client("sqs")  # type: ignore[no-any-return]

    def ddb(self) -> DynamoDBClient:
        return self.client("dynamodb")  # type: ignore[no-any-return]

    def bindings(self) -> list[FunctionBinding]:
        found = discover_bindings(self.client("lambda"), self.sqs(), self.app)
        return self._on_store(found)

    def stream_bindings(self, *, tables: bool = False) -> list[StreamBinding]:
        """The stack's Kinesis stream consumers (none for an app without streams); with
        `tables`, its table streams' consumers too (read from DynamoDB Local's streams)."""
        if self.deployment is None:
            raise RuntimeError("the local stack is not started: nothing is deployed yet")
        specs = stream_consumers(self.deployment.assembly_dir, self.stack_name, tables=tables)
        found = discover_stream_bindings(self.client("lambda"), self.sqs(), self.app, specs)
        return self._on_store(found)

    def api_bindings(self) -> list[ApiBinding]:
        return self._on_store(discover_api_bindings(self.client("lambda"), self.app))

    def subscriber_bindings(self, retry: RetryPolicy | None = None) -> list[SubscriberBinding]:
        """The topics' direct subscribers, each with a tap queue subscribed in its place (on
        the first call; later calls return the same bindings). Call it before publishing:
        a message published earlier never reaches the tap."""
        if self._subscribers is None:
            found = discover_subscriber_bindings(
                self.client("lambda"),
                self.client("sns"),
                self.sqs(),
                self.app,
                stack=self.stack_name,
                retry=retry or RetryPolicy.from_environment(),
            )
            self._subscribers = self._on_store(found)
        return self._subscribers


def discover_bindings(
    lambda_client: LambdaClient, sqs: SQSClient, app: DeployedApp
) -> list[FunctionBinding]:
    """Read each consumer's deployed function and mapping: environment, timeout, batching."""
    bindings = []
    for consumer in app.consumers:
        name = app.physical_id(consumer.function.logical_id)
        config = lambda_client.get_function_configuration(FunctionName=name)
        mappings = lambda_client.list_event_source_mappings(FunctionName=name)[
            "EventSourceMappings"
        ]
        if len(mappings) != 1:
            raise RuntimeError(f"{name} has {len(mappings)} event source mappings, expected 1")
        mapping = mappings[0]
        queue_url = app.physical_id(consumer.queue)
        bindings.append(
            FunctionBinding(
                function_name=name,
                source_dir=str(consumer.function.code_folder()),
                handler=config.get("Handler", consumer.function.handler),
                environment=deployed_environment(config, consumer.function.layer_dirs),
                timeout_s=int(config.get("Timeout", 30)),
                queue_url=queue_url,
                queue_arn=mapping.get("EventSourceArn")
                or sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
                    "Attributes"
                ]["QueueArn"],
                batch_size=int(mapping.get("BatchSize", 10)),
                batching_window_s=int(mapping.get("MaximumBatchingWindowInSeconds", 0)),
                consumer=consumer.id,
            )
        )
    return bindings
