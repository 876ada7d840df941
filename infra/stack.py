"""This repository's stack, built from the `exactly_once_cdk` constructs like any other user's.

Settings come from cdk.json and `-c` flags (`infra.settings`); one `IdempotentConsumer` per
registry entry (`infra.consumers`), one `IdempotentHttpApi` per API (`infra.apis`), one
`IdempotentTopic` per topic with its queue and direct subscribers (`infra.topics`), and one
`KinesisStreamConsumer` per stream (`infra.streams`), with the code in `functions/`.

The idempotency store is `-c store=dynamodb` (the default: the idempotency and ledger tables) or
`-c store=postgres` (`IdempotencyDatabase`: Aurora PostgreSQL behind RDS Proxy in a VPC, with the
examples' ledger in it too, so neither DynamoDB table is made). Every function that uses the
store takes it as one `RecordStore`, which brings its variables, network and grants.

A prod stage is its own stack, `{stackName}-{stage}`, bound to the account and region given with
`-c account=... -c region=...` (`Settings.from_context` refuses prod without them), with
termination protection on; every resource is tagged with the project, the stage and the tool.
"""

from __future__ import annotations

from typing import Any, TypedDict

from aws_cdk import (
    CfnOutput,
    CliCredentialsStackSynthesizer,
    Duration,
    Environment,
    IStackSynthesizer,
    RemovalPolicy,
    Stack,
    Tags,
)
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from exactly_once_cdk import (
    AlarmTopic,
    ExactlyOnceDashboard,
    ExactlyOnceLayer,
    FunctionOptions,
    IdempotencyDatabase,
    IdempotencyTable,
    IdempotentConsumer,
    IdempotentHttpApi,
    IdempotentSubscriber,
    IdempotentTopic,
    KinesisStreamConsumer,
    LedgerTable,
    StuckLockMonitor,
)
from exactly_once_cdk.functions import ASSET_EXCLUDES, retention
from exactly_once_cdk.outputs import LOCAL_DYNAMODB_CONTEXT, LOCAL_DYNAMODB_ENDPOINT
from exactly_once_cdk.record_store import RecordStore
from infra.apis import APIS, ApiSpec
from infra.consumers import CONSUMERS, ConsumerSpec
from infra.settings import Settings, resolve
from infra.streams import STREAMS, StreamSpec
from infra.topics import TOPICS, SubscriberSpec, TopicSpec


class EntryPointKeywords(TypedDict):
    """The keywords `IdempotentConsumer`, `IdempotentHttpApi` and `IdempotentSubscriber` share."""

    code: lambda_.Code
    handler: str
    table: RecordStore
    layer: lambda_.ILayerVersion
    ledger: LedgerTable | None
    idempotency_scope: str | None
    description: str | None
    block_expired_leases: bool
    alarm_topic: sns.ITopic | None
    function_options: FunctionOptions | None


def local_synthesizer() -> IStackSynthesizer:
    """For moto: no bootstrap stack, no deploy roles, no bootstrap-version rule.

    Assets go to the default bootstrap bucket name, which `local_aws/local_deploy.py` creates.
    """
    return CliCredentialsStackSynthesizer()


PROJECT_TAG = "exactly-once-sqs"
UNTAGGABLE = ["AWS::RDS::DBProxyTargetGroup"]


def warm_throughput(settings: Settings) -> dynamodb.WarmThroughput | None:
    """The idempotency table's warm throughput from the context, or None when neither is set."""
    reads, writes = settings.warm_read_units_per_second, settings.warm_write_units_per_second
    if reads is None and writes is None:
        return None
    return dynamodb.WarmThroughput(read_units_per_second=reads, write_units_per_second=writes)


def stack_tags(settings: Settings) -> dict[str, str]:
    """On every taggable resource and on the stack itself (cost reports, ownership)."""
    return {"Project": PROJECT_TAG, "Stage": settings.stage, "ManagedBy": "aws-cdk"}


class ExactlyOnceStack(Stack):
    def __init__(
        self,
        scope: Construct,
        *,
        settings: Settings,
        consumers: tuple[ConsumerSpec, ...] = CONSUMERS,
        apis: tuple[ApiSpec, ...] = APIS,
        topics: tuple[TopicSpec, ...] = TOPICS,
        streams: tuple[StreamSpec, ...] = STREAMS,
        **kwargs: Any,
    ) -> None:
        name = settings.deployed_stack_name
        bound = settings.account is not None or settings.region is not None
        super().__init__(
            scope,
            name,
            stack_name=name,
            description="Exactly-once on Lambda: queues, a topic, an HTTP API, DLQs, idempotency",
            synthesizer=local_synthesizer() if settings.local_stack else None,
            env=Environment(account=settings.account, region=settings.region) if bound else None,
            termination_protection=settings.is_prod,
            # Not into moto: its CloudFormation (5.2) fails to create the tagged template (the
            # CLI's first create ends in AlreadyExistsException), and nothing there is billed.
            tags=None if settings.local_stack else stack_tags(settings),
            **kwargs,
        )
        for key, value in ({} if settings.local_stack else stack_tags(settings)).items():
            # explicitStackTags: `tags=` alone tags the stack only. CDK counts RDS Proxy target
            # groups as taggable, CloudFormation's schema does not (validation fails).
            Tags.of(self).add(key, value, exclude_resource_types=UNTAGGABLE)
        self.settings = settings
        removal = RemovalPolicy.RETAIN if settings.is_prod else RemovalPolicy.DESTROY
        self.removal = removal
        options = FunctionOptions(
            log_retention=retention(settings.log_retention_days),
            log_removal_policy=removal,
            tracing=settings.xray,
            target=settings.runtime_target,
        )

        postgres = settings.store == "postgres"
        self.idempotency: IdempotencyTable | None = None
        self.ledger: LedgerTable | None = None
        self.database: IdempotencyDatabase | None = None
        if not postgres:
            tables = Construct(self, "Tables")  # keeps the tables' logical ids from before 0.2
            self.idempotency = IdempotencyTable(
                tables,
                "Idempotency",
                removal_policy=removal,
                warm_throughput=warm_throughput(settings),
            )
            self.ledger = LedgerTable(tables, "Ledger", removal_policy=removal)
        self.layer = ExactlyOnceLayer(
            self,
            "SharedLayer",
            removal_policy=removal,
            postgres=postgres,
            target=settings.runtime_target,
            bytecode=settings.layer_bytecode,
        )
        self.alarm_topic = AlarmTopic(
            self, "Alarms", email=settings.alarm_email, removal_policy=removal
        )
        topic = self.alarm_topic.topic
        self.records: RecordStore
        if self.idempotency is not None and self.ledger is not None:
            self.idempotency.alarms("Idempotency", topic)
            self.ledger.throttle_alarm("Ledger", topic)
            self.records = self.idempotency
        else:
            # No DynamoDB table at all: the records and the examples' ledger are in PostgreSQL
            # (with no LEDGER_TABLE, `exactly_once.ledger` writes in the holder's transaction).
            # An idempotency table left behind would be an empty one that `eonce locks` could
            # find and report as "no stuck locks".
            self.database = IdempotencyDatabase(
                self,
                "Database",
                layer=self.layer,
                removal_policy=removal,
                alarm_topic=topic,
                function_options=options,
            )
            self.records = self.database

        self.consumers = [self._consumer(spec, options) for spec in consumers]
        self.apis = [self._api(spec, options) for spec in apis]
        self.topics = [self._topic(spec, removal) for spec in topics]
        self.subscribers = [
            self._subscriber(spec, topic, options)
            for topic, topic_spec in zip(self.topics, topics, strict=True)
            for spec in topic_spec.subscribers
        ]
        self.streams = [self._stream(spec, options) for spec in streams]
        self.lock_monitor = StuckLockMonitor(
            self,
            "LockMonitor",
            table=self.records,
            layer=self.layer,
            interval=Duration.minutes(settings.lock_monitor_interval_minutes),
            alarm_topic=topic,
            function_options=options,
        )
        self.dashboard = ExactlyOnceDashboard(
            self,
            "Dashboard",
            consumers=self.consumers,
            tables=[
                (label, table)
                for label, table in (("Idempotency", self.idempotency), ("Ledger", self.ledger))
                if table is not None
            ],
            monitor=self.lock_monitor,
            apis=self.apis,
            topics=self.topics,
            subscribers=self.subscribers,
            database=self.database,
            streams=self.streams,
        )
        CfnOutput(self, "LockMonitorFunctionName", value=self.lock_monitor.function.function_name)
        CfnOutput(self, "AlarmTopicArn", value=topic.topic_arn)
        # Only the local stack (local_aws.local_stack) sets this: its tables live in DynamoDB
        # Local, apart from moto, and the CLI finds them through this output.
        local_dynamodb = self.node.try_get_context(LOCAL_DYNAMODB_CONTEXT)
        if local_dynamodb:
            CfnOutput(self, LOCAL_DYNAMODB_ENDPOINT, value=str(local_dynamodb))

    def _entry_point(
        self, spec: ConsumerSpec | ApiSpec | SubscriberSpec | StreamSpec, options: FunctionOptions
    ) -> EntryPointKeywords:
        """What a consumer, an API and a subscriber take alike from their registry entry and
        the stack: the code, the shared store, ledger and layer, the alarm topic."""
        return EntryPointKeywords(
            code=lambda_.Code.from_asset(str(spec.source_path), exclude=ASSET_EXCLUDES),
            handler=spec.handler,
            table=self.records,
            layer=self.layer,
            ledger=self.ledger,
            idempotency_scope=spec.scope,
            description=spec.description or None,
            block_expired_leases=spec.block_expired_leases,
            alarm_topic=self.alarm_topic.topic,
            function_options=options,
        )

    def _consumer(self, spec: ConsumerSpec, options: FunctionOptions) -> IdempotentConsumer:
        config = resolve(spec, self.settings)
        return IdempotentConsumer(
            self,
            spec.id,
            **self._entry_point(spec, options),
            fifo=spec.fifo,
            timeout=Duration.seconds(config.timeout_seconds),
            memory_size=config.memory_mb,
            batch_size=config.batch_size,
            batching_window=Duration.seconds(config.batching_window_seconds),
            max_concurrency=config.max_concurrency,
            min_pollers=config.min_pollers,
            max_pollers=config.max_pollers,
            max_receive_count=config.max_receive_count,
            lease_margin=Duration.seconds(config.lease_margin_seconds),
            # Prod keeps both queues on a stack deletion: up to 14 days of dead letters (and the
            # undelivered messages) are payments nobody can get back.
            removal_policy=self.removal,
            queue_age_alarm=Duration.seconds(self.settings.queue_age_alarm_seconds),
            dead_letter_age_alarm=Duration.seconds(self.settings.dlq_age_alarm_seconds),
            # Deployed into moto the mapping must stay off: moto runs it synchronously on send
            # and deletes failed messages; the local poller does the polling instead.
            mapping_enabled=not self.settings.local_stack,
        )

    def _api(self, spec: ApiSpec, options: FunctionOptions) -> IdempotentHttpApi:
        """The context's function tuning is the consumers' (its 30 s default timeout is over API
        Gateway's limit): an API takes the registry's values or the construct's (29 s, 256 MB).
        The lease margin is the store's, shared with the consumers."""
        tuning: dict[str, Any] = {}
        if spec.timeout_seconds:
            tuning["timeout"] = Duration.seconds(spec.timeout_seconds)
        if spec.memory_mb:
            tuning["memory_size"] = spec.memory_mb
        return IdempotentHttpApi(
            self,
            spec.id,
            **self._entry_point(spec, options),
            routes=spec.routes,
            lease_margin=Duration.seconds(self.settings.lease_margin_seconds),
            # Deployed into moto the API stays out: moto's CloudFormation (5.2) has no
            # AWS::ApiGatewayV2::* models and skips them with a warning, leaving an `ApiId`
            # output missing, a URL of "https://None.execute-api..." and a permission for
            # "None". The function and its FunctionName output stay: the local HTTP gateway
            # reads the function's environment from moto and serves the routes itself.
            create_api=not self.settings.local_stack,
            **tuning,
        )

    def _topic(self, spec: TopicSpec, removal: RemovalPolicy) -> IdempotentTopic:
        topic = IdempotentTopic(
            self,
            spec.id,
            display_name=spec.description or None,
            removal_policy=removal,
            alarm_topic=self.alarm_topic.topic,
        )
        consumers = {consumer.name: consumer for consumer in self.consumers}
        for consumer_id in spec.queues:
            if consumer_id not in consumers:
                raise KeyError(f"topic {spec.id}: no consumer {consumer_id!r} to subscribe")
            topic.subscribe_queue(
                consumers[consumer_id],
                raw_message_delivery=spec.raw_delivery,
                # Deployed into moto the queue subscription is written into the topic itself:
                # moto's CloudFormation (5.2) has no AWS::SNS::Subscription model and skips it
                # with a warning, but it subscribes the topic's own `Subscription` entries, so
                # moto's SNS -> SQS delivery works locally as it does in AWS.
                inline=self.settings.local_stack,
            )
        return topic

    def _subscriber(
        self, spec: SubscriberSpec, topic: IdempotentTopic, options: FunctionOptions
    ) -> IdempotentSubscriber:
        """Timeout and memory: the registry's, else the stack-wide function settings."""
        return IdempotentSubscriber(
            self,
            spec.id,
            **self._entry_point(spec, options),
            topic=topic.topic,
            timeout=Duration.seconds(
                spec.timeout_seconds or self.settings.function_timeout_seconds
            ),
            memory_size=spec.memory_mb or self.settings.memory_mb,
            lease_margin=Duration.seconds(self.settings.lease_margin_seconds),
            retry_attempts=spec.retry_attempts,
            dead_letter_removal_policy=self.removal,
            dead_letter_age_alarm=Duration.seconds(self.settings.dlq_age_alarm_seconds),
            # Deployed into moto the Lambda subscription stays out: on Publish, moto's SNS
            # invokes a subscribed function itself, which needs Docker (moto 5.2 logs "error
            # running docker" for every message). The local stack delivers topic messages to
            # the subscriber's code in-process instead. The function, its DLQ, the
            # asynchronous-invocation config (moto skips it) and the outputs stay.
            subscribe=not self.settings.local_stack,
        )

    def _stream(self, spec: StreamSpec, options: FunctionOptions) -> KinesisStreamConsumer:
        """Timeout, memory and lease margin: the stack-wide function settings; the stream and
        both queues follow the stage's removal policy like the consumers' queues."""
        return KinesisStreamConsumer(
            self,
            spec.id,
            **self._entry_point(spec, options),
            timeout=Duration.seconds(self.settings.function_timeout_seconds),
            memory_size=self.settings.memory_mb,
            lease_margin=Duration.seconds(self.settings.lease_margin_seconds),
            removal_policy=self.removal,
            dead_letter_age_alarm=Duration.seconds(self.settings.dlq_age_alarm_seconds),
            # Deployed into moto the mapping stays off (moto polls nothing): the local stack's
            # stream poller reads the shards and invokes the function as the mapping would.
            mapping_enabled=not self.settings.local_stack,
        )
