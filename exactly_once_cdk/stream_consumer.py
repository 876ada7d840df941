"""`StreamConsumerBase`: what a stream consumer is besides its source (Kinesis, DynamoDB Streams,
Kafka): the function on the shared layer and store, two queues, the event source mapping's
error handling, grants, alarms and a dashboard row.

The handler (`exactly_once.stream_consumer`) runs records in order per shard or partition,
answers with the first failed record of each (`batchItemFailures`) and never raises, so every
mapping here has ReportBatchItemFailures on; BisectBatchOnFunctionError then acts only on what
the handler cannot answer for (a crash, a timeout). Two queues, because two things are lost in
different shapes:
- the DLQ (`DEAD_LETTER_QUEUE_URL`): records the handler gives up on (not JSON, no key, a
  PermanentError, its own `max_attempts`), each with its data and the reason;
- the on-failure queue: batches the mapping gives up on (`retry_attempts` or `max_record_age`
  exhausted), as Lambda's invocation record naming the shard and sequence range (Kinesis,
  DynamoDB) or the topic, partition and offset (Kafka), not the data. Read the records back
  from the stream while it still holds them (Kinesis keeps 24 hours by default).
Both are SSE-SQS and SSL-only, and both alarm on a single message.

Defaults, each a keyword: batches of 100, 10 retries, records up to 6 hours old, starting at
TRIM_HORIZON (nothing already in the stream is skipped), one batch per shard at a time
(`parallelization_factor=1`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

import jsii
from aws_cdk import Acknowledgment, CfnOutput, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from exactly_once_cdk import outputs as names
from exactly_once_cdk.alarms import AlarmSpec, function_alarms
from exactly_once_cdk.consumer import (
    DEAD_LETTER_AGE_ALARM,
    DLQ_RETENTION,
    LEASE_MARGIN,
    MAX_MESSAGE_BYTES,
    METRICS_NAMESPACE,
    TIMEOUT,
)
from exactly_once_cdk.consumer_rules import queue_name
from exactly_once_cdk.functions import FunctionOptions, store_function
from exactly_once_cdk.local_mode import on_local_stack
from exactly_once_cdk.record_store import RecordStore
from exactly_once_cdk.stream_alarms import (
    STREAM_MAPPING_METRICS,
    on_failure_widget,
    stream_alarm_specs,
)
from exactly_once_cdk.stream_rules import check_stream_mapping
from exactly_once_cdk.tables import LedgerTable
from exactly_once_cdk.unfinished_work import THRESHOLD as UNFINISHED_THRESHOLD
from exactly_once_cdk.unfinished_work import WINDOW as UNFINISHED_WINDOW
from exactly_once_cdk.unfinished_work import UnfinishedWork
from exactly_once_cdk.widgets import (
    dead_letter_queue_widget,
    event_source_mapping_widget,
    function_widget,
    outcome_widget,
)

BATCH_SIZE = 100  # Lambda's default for Kinesis, DynamoDB Streams and Kafka
RETRY_ATTEMPTS = (
    10  # what Lambda applies to a Kafka mapping with infinite retries and a destination
)
MAX_RECORD_AGE = Duration.hours(6)  # leaves 18 of Kinesis's default 24 hours to re-read them
PARALLELIZATION_FACTOR = 1
ITERATOR_AGE_ALARM = Duration.minutes(10)


class StreamConsumerOptions(TypedDict, total=False):
    """What every stream consumer takes besides its source; each has the default shown.

    handler ("handler.handle"); idempotency_scope (the construct id in lower case: the
    CONSUMER_SCOPE); description; ledger; block_expired_leases (False); environment (added to,
    and over, the construct's); timeout (30 s); memory_size (256); lease_margin (5 s);
    max_attempts (None: the handler gives a record up only when it is poison; N:
    STREAM_MAX_ATTEMPTS, at most retry_attempts + 1); batch_size (100); retry_attempts (10; None
    is infinite); max_record_age (6 hours; None is infinite); alarm_topic; dead_letter_age_alarm
    (3 days); unfinished_window and unfinished_threshold; function_options; mapping_enabled
    (off on the local stack, whose poller runs the function, on elsewhere); outputs (True);
    removal_policy (RETAIN, for both queues); dead_letter_queue_props, on_failure_queue_props
    (any `sqs.Queue` keyword); event_source_props (any `lambda_.EventSourceMapping` keyword,
    applied last); metrics_namespace ("ExactlyOnce").
    """

    handler: str
    idempotency_scope: str | None
    description: str | None
    ledger: LedgerTable | None
    block_expired_leases: bool
    environment: Mapping[str, str] | None
    timeout: Duration
    memory_size: int
    lease_margin: Duration
    max_attempts: int | None
    batch_size: int
    retry_attempts: int | None
    max_record_age: Duration | None
    alarm_topic: sns.ITopic | None
    dead_letter_age_alarm: Duration
    unfinished_window: Duration
    unfinished_threshold: float
    function_options: FunctionOptions | None
    mapping_enabled: bool | None
    outputs: bool
    removal_policy: RemovalPolicy
    dead_letter_queue_props: Mapping[str, Any] | None
    on_failure_queue_props: Mapping[str, Any] | None
    event_source_props: Mapping[str, Any] | None
    metrics_namespace: str


@jsii.implements(lambda_.IEventSourceDlq)
class _OnFailureQueue:
    """An SQS on-failure destination that grants nothing: `SqsDlq` grants GetQueueAttributes
    and GetQueueUrl too, and the role already has its one SendMessage statement."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self._queue = queue

    def bind(
        self, target: lambda_.IEventSourceMapping, target_handler: lambda_.IFunction
    ) -> lambda_.DlqDestinationConfig:
        return lambda_.DlqDestinationConfig(destination=self._queue.queue_arn)


def _seconds(duration: Duration | None) -> int | None:
    return None if duration is None else int(duration.to_seconds())


class StreamConsumerBase(Construct):
    """The parts every stream consumer shares; `KinesisStreamConsumer`,
    `DynamoDbStreamConsumer` and `KafkaConsumer` add the source, its read grants, the mapping's
    source keywords and their lag metric. `table` is the idempotency store (an
    `IdempotencyTable` or an `IdempotencyDatabase`); `code` and `handler` are your function, a
    handler wrapped in `exactly_once.stream_consumer`. Keywords: `StreamConsumerOptions`."""

    source_label = "stream"  # the function's default description says which kind
    source_kind = "kinesis"  # the metadata's "source": one of outputs.STREAM_SOURCES

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        options: StreamConsumerOptions,
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = construct_id
        self._options = options
        self.metrics_namespace = options.get("metrics_namespace", METRICS_NAMESPACE)
        self.idempotency_scope = options.get("idempotency_scope") or construct_id.lower()
        self.unfinished_work = UnfinishedWork(
            self.metrics_namespace,
            self.idempotency_scope,
            options.get("unfinished_window", UNFINISHED_WINDOW),
            options.get("unfinished_threshold", UNFINISHED_THRESHOLD),
        )
        self.retry_attempts = options.get("retry_attempts", RETRY_ATTEMPTS)
        self.max_record_age = options.get("max_record_age", MAX_RECORD_AGE)
        self.max_attempts = options.get("max_attempts")
        removal_policy = options.get("removal_policy", RemovalPolicy.RETAIN)
        self.dead_letter_queue = self._queue(
            "DeadLetterQueue", "dlq", options.get("dead_letter_queue_props"), removal_policy
        )
        self.on_failure_queue = self._queue(
            "OnFailureQueue", "failed", options.get("on_failure_queue_props"), removal_policy
        )
        environment = {"DEAD_LETTER_QUEUE_URL": self.dead_letter_queue.queue_url}
        if self.max_attempts is not None:
            environment["STREAM_MAX_ATTEMPTS"] = str(self.max_attempts)
        built = store_function(
            self,
            code=code,
            handler=options.get("handler", "handler.handle"),
            description=options.get("description")
            or f"Idempotent {self.source_label} consumer {construct_id}",
            layer=layer,
            table=table,
            ledger=options.get("ledger"),
            scope_variable="CONSUMER_SCOPE",
            idempotency_scope=self.idempotency_scope,
            metrics_namespace=self.metrics_namespace,
            lease_margin=options.get("lease_margin", LEASE_MARGIN),
            block_expired_leases=options.get("block_expired_leases", False),
            environment={**environment, **(options.get("environment") or {})},
            timeout=options.get("timeout", TIMEOUT),
            memory_size=options.get("memory_size", 256),
            options=options.get("function_options") or FunctionOptions(),
        )
        self.function = built.function
        self.role = built.role
        # What tells `eonce` and the local stack's template reader this is a stream consumer.
        cast(lambda_.CfnFunction, self.function.node.default_child).add_metadata(
            names.ENTRY_POINT_METADATA,
            {"kind": names.KIND_STREAM, "id": construct_id, "source": self.source_kind},
        )
        # A batch's records go through the store's batch calls as the SQS consumer's do.
        table.grant_batches(self.role)
        self._grant_queues()

    def _queue(
        self,
        construct_id: str,
        suffix: str,
        props: Mapping[str, Any] | None,
        removal: RemovalPolicy,
    ) -> sqs.Queue:
        """Named "<stack>-<id>-<suffix>" as the other constructs' queues are (checked against
        SQS's 80 characters at synth), so an operator finds them by their consumer's name."""
        queue = sqs.Queue(
            self,
            construct_id,
            **{
                "queue_name": queue_name(
                    f"{Stack.of(self).stack_name}-{self.name}-{suffix}", fifo=False
                ),
                "encryption": sqs.QueueEncryption.SQS_MANAGED,
                "enforce_ssl": True,
                "retention_period": DLQ_RETENTION,
                # A stream record (and Lambda's invocation record naming a batch) up to SQS's
                # largest message; a larger record's send fails and the handler reports it
                # failed (retried), never lost.
                "max_message_size_bytes": MAX_MESSAGE_BYTES,
                # Nothing redrives into these queues from another queue.
                "redrive_allow_policy": sqs.RedriveAllowPolicy(
                    redrive_permission=sqs.RedrivePermission.DENY_ALL
                ),
                **(props or {}),
            },
        )
        queue.apply_removal_policy(removal)
        Validations.of(queue).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SQS3",
                reason="This queue is a stream consumer's dead-letter queue: the handler's "
                "given-up records (DeadLetterQueue) or the event source mapping's on-failure "
                "destination (OnFailureQueue) end here; cdk-nag recognizes only SQS redrive "
                "policies and Lambda DeadLetterConfig as dead-letter use.",
            )
        )
        return queue

    def _grant_queues(self) -> None:
        """One SendMessage statement per queue: the handler sends to the DLQ, Lambda's mapping
        sends to the on-failure queue with the function's role. A queue under a
        customer-managed key (`encryption=KMS` in its props) also needs the key."""
        for sid, queue in (
            ("SendGivenUpRecordsToDeadLetterQueue", self.dead_letter_queue),
            ("SendGivenUpBatchesToOnFailureQueue", self.on_failure_queue),
        ):
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid=sid, actions=["sqs:SendMessage"], resources=[queue.queue_arn]
                )
            )
            key = queue.encryption_master_key
            if key is not None:
                self.role.add_to_policy(
                    iam.PolicyStatement(
                        sid=f"EncryptFor{sid.removeprefix('SendGivenUp')}",
                        actions=["kms:Decrypt", "kms:GenerateDataKey"],
                        resources=[key.key_arn],
                    )
                )

    def _event_source_mapping(
        self,
        source: Mapping[str, Any],
        *,
        batching_window: Duration | None,
        parallelization_factor: int | None,
    ) -> lambda_.EventSourceMapping:
        """The mapping with the error handling every stream source shares; `source` holds the
        source's own keywords (its ARN or brokers, topic, pollers...)."""
        options = self._options
        batch_size = options.get("batch_size", BATCH_SIZE)
        check_stream_mapping(
            self.name,
            batch_size=batch_size,
            batching_window_seconds=_seconds(batching_window),
            retry_attempts=self.retry_attempts,
            max_record_age_seconds=_seconds(self.max_record_age),
            parallelization_factor=parallelization_factor,
            max_attempts=self.max_attempts,
        )
        enabled = options.get("mapping_enabled")
        if enabled is None:  # off in the emulator, where the local poller polls
            enabled = not on_local_stack(self)
        props: dict[str, Any] = {
            "target": self.function,
            "batch_size": batch_size,
            "starting_position": lambda_.StartingPosition.TRIM_HORIZON,
            "report_batch_item_failures": True,
            "bisect_batch_on_error": True,
            "retry_attempts": self.retry_attempts,
            "max_record_age": self.max_record_age,
            "on_failure": _OnFailureQueue(self.on_failure_queue),
            "metrics_config": lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
            "enabled": enabled,
            **source,
        }
        if batching_window is not None:
            props["max_batching_window"] = batching_window
        if parallelization_factor is not None:
            props["parallelization_factor"] = parallelization_factor
        mapping = lambda_.EventSourceMapping(
            self, "EventSourceMapping", **{**props, **(options.get("event_source_props") or {})}
        )
        # Lambda checks the role's read and SendMessage rights when it creates the mapping.
        mapping.node.add_dependency(self.role)
        self.event_source_mapping = mapping
        return mapping

    def _finish(
        self,
        lag: cloudwatch.IMetric,
        lag_threshold: float,
        lag_description: str,
        extra: Sequence[AlarmSpec] = (),
    ) -> None:
        """Alarms (`extra`: the source's own, after the lag alarm) and outputs, once the
        subclass has its source and mapping."""
        options = self._options
        self._lag = lag
        specs: list[AlarmSpec] = stream_alarm_specs(
            self.name,
            function=self.function,
            lag=lag,
            lag_threshold=lag_threshold,
            lag_description=lag_description,
            on_failure_queue=self.on_failure_queue,
            dead_letter_queue=self.dead_letter_queue,
            dead_letter_age=options.get("dead_letter_age_alarm", DEAD_LETTER_AGE_ALARM),
        )
        specs[1:1] = extra
        self.alarms = function_alarms(
            self,
            self.name,
            self.function,
            options.get("alarm_topic"),
            self.unfinished_work,
            own=specs,
        )
        if options.get("outputs", True):
            for suffix, value in self._output_values().items():
                CfnOutput(Stack.of(self), f"{self.name}{suffix}", value=value)

    def _output_values(self) -> dict[str, str]:
        """No `<Id>DeadLetterQueueUrl`: the CLI reads a function with one and no queue as an SNS
        subscriber. The DLQ's URL is in the function's environment."""
        return {
            names.FUNCTION_NAME: self.function.function_name,
            names.DEAD_LETTER_QUEUE_ARN: self.dead_letter_queue.queue_arn,
            names.ON_FAILURE_QUEUE_ARN: self.on_failure_queue.queue_arn,
        }

    def lag_metrics(self) -> list[cloudwatch.IMetric]:
        """The dashboard's lag graph; a source with a metric of its own adds it."""
        return [self._lag]

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        name = self.name
        return [
            function_widget(name, self.function),
            cloudwatch.GraphWidget(title=f"{name} lag", left=self.lag_metrics(), width=6),
            dead_letter_queue_widget(name, self.dead_letter_queue),
            on_failure_widget(name, self.on_failure_queue),
            self.unfinished_work.widget(f"{name} started minus finished"),
            event_source_mapping_widget(name, self.event_source_mapping, STREAM_MAPPING_METRICS),
            outcome_widget(name, self.metrics_namespace, "consumer", self.idempotency_scope),
        ]
