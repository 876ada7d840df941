"""`IdempotentConsumer`: a queue, its DLQ, the Lambda function, the event source mapping, alarms.

Secure defaults throughout (SSE-SQS, SSL-only queues, a role with item-level rights only, partial
batch responses, a DLQ with a redrive allow policy); every default is a keyword, and the
`*_props` mappings override or add any keyword of the underlying CDK construct.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from aws_cdk import ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from exactly_once_cdk import outputs as names
from exactly_once_cdk.alarms import (
    ALARM_PERIOD,
    AlarmSpec,
    dead_letter_alarm_specs,
    function_alarms,
)
from exactly_once_cdk.consumer_rules import (
    MAX_CONCURRENCY,
    check_consumer,
    check_scaling,
    queue_name,
    visibility_timeout_seconds,
)
from exactly_once_cdk.functions import FunctionOptions, store_function
from exactly_once_cdk.local_mode import on_local_stack
from exactly_once_cdk.record_store import RecordStore
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

METRICS_NAMESPACE = "ExactlyOnce"
DLQ_RETENTION = Duration.days(14)
# SQS's and the Lambda SQS event source's largest message (1 MiB since 2025), on the queue and its
# DLQ alike: a DLQ must accept whatever its source accepts, or redriving a large message fails.
MAX_MESSAGE_BYTES = 1_048_576
# Defaults as module constants (a call in a signature runs once anyway; this says so).
TIMEOUT = Duration.seconds(30)
NO_WINDOW = Duration.seconds(0)
LEASE_MARGIN = Duration.seconds(5)
QUEUE_AGE_ALARM = Duration.minutes(10)
DEAD_LETTER_AGE_ALARM = Duration.days(3)  # well inside the DLQ's 14-day retention


def _check_visibility(
    queue_props: Mapping[str, Any] | None, timeout: Duration, window_s: int
) -> None:
    """`queue_props` may lengthen the visibility timeout, never shorten it below AWS's rule."""
    given = (queue_props or {}).get("visibility_timeout")
    wanted = visibility_timeout_seconds(int(timeout.to_seconds()), window_s)
    if given is not None and given.to_seconds() < wanted:
        raise ValueError(
            f"queue_props visibility_timeout {given.to_seconds():g} s is under {wanted} s "
            "(six function timeouts plus the batching window)"
        )


def _check_message_size(
    queue_props: Mapping[str, Any] | None, dead_letter_queue_props: Mapping[str, Any] | None
) -> None:
    """The DLQ takes every message the queue takes: SQS's redrive and the layer's DLQ send
    would otherwise fail on the largest ones (which the layer then reports failed, not lost)."""
    source = (queue_props or {}).get("max_message_size_bytes", MAX_MESSAGE_BYTES)
    dead = (dead_letter_queue_props or {}).get("max_message_size_bytes", MAX_MESSAGE_BYTES)
    if dead < source:
        raise ValueError(
            f"dead_letter_queue_props max_message_size_bytes {dead} is under the queue's "
            f"{source}: a DLQ must accept every message its queue accepts"
        )


class IdempotentConsumer(Construct):
    """One consumer: its own queue, DLQ, function and mapping; the table and layer are shared.

    `table` is the idempotency store: an `IdempotencyTable` (DynamoDB) or an
    `IdempotencyDatabase` (PostgreSQL, which puts the function in its VPC).

    `code` and `handler` are your function (a handler wrapped in `exactly_once.sqs_consumer`).
    `idempotency_scope` is the first half of every record id; it defaults to the construct id
    in lower case. With `outputs`, the stack gets `<Id>QueueUrl`, `<Id>DeadLetterQueueUrl`,
    `<Id>FunctionName` and the ARNs, which is how `eonce --stack` finds the consumer.
    Scaling is one of two kinds: `max_concurrency` (default 5 concurrent invocations), or
    provisioned pollers (`min_pollers`/`max_pollers`, AWS defaults 2/200): faster scaling, but
    the minimum pollers are billed around the clock, messages or not. Both is an error.
    `mapping_enabled` left unset follows the app's `localStack` context
    (`exactly_once_cdk.local_mode`): the mapping is created disabled in the local emulator,
    whose poller runs the function instead, and enabled everywhere else.
    `removal_policy` applies to both queues: RETAIN (the default) keeps them, and the messages
    in them, when the stack is deleted; DESTROY suits throwaway stages.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        handler: str = "handler.handle",
        idempotency_scope: str | None = None,
        description: str | None = None,
        fifo: bool = False,
        block_expired_leases: bool = False,
        ledger: LedgerTable | None = None,
        environment: Mapping[str, str] | None = None,
        timeout: Duration = TIMEOUT,
        memory_size: int = 256,
        batch_size: int = 10,
        batching_window: Duration = NO_WINDOW,
        max_concurrency: int | None = None,
        min_pollers: int | None = None,
        max_pollers: int | None = None,
        max_receive_count: int = 5,
        lease_margin: Duration = LEASE_MARGIN,
        alarm_topic: sns.ITopic | None = None,
        queue_age_alarm: Duration = QUEUE_AGE_ALARM,
        dead_letter_age_alarm: Duration = DEAD_LETTER_AGE_ALARM,
        unfinished_window: Duration = UNFINISHED_WINDOW,
        unfinished_threshold: float = UNFINISHED_THRESHOLD,
        function_options: FunctionOptions | None = None,
        mapping_enabled: bool | None = None,
        outputs: bool = True,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        queue_props: Mapping[str, Any] | None = None,
        dead_letter_queue_props: Mapping[str, Any] | None = None,
        event_source_props: Mapping[str, Any] | None = None,
        metrics_namespace: str = METRICS_NAMESPACE,
    ) -> None:
        super().__init__(scope, construct_id)
        self.name = construct_id
        self.metrics_namespace = metrics_namespace
        self.idempotency_scope = idempotency_scope or construct_id.lower()
        self.unfinished_work = UnfinishedWork(
            metrics_namespace, self.idempotency_scope, unfinished_window, unfinished_threshold
        )
        window_s = int(batching_window.to_seconds())
        check_consumer(
            construct_id, fifo=fifo, batch_size=batch_size, batching_window_seconds=window_s
        )
        _check_visibility(queue_props, timeout, window_s)
        _check_message_size(queue_props, dead_letter_queue_props)
        check_scaling(
            construct_id,
            max_concurrency=max_concurrency,
            min_pollers=min_pollers,
            max_pollers=max_pollers,
        )
        provisioned = min_pollers is not None or max_pollers is not None
        if mapping_enabled is None:  # off in the emulator, where the local poller polls
            mapping_enabled = not on_local_stack(self)
        stack = Stack.of(self)
        # Named queues: the DLQ's redrive allow policy must name its source queue's ARN, and a
        # reference to the queue would be a cycle (the queue's redrive policy names the DLQ).
        name = (queue_props or {}).get("queue_name") or queue_name(
            f"{stack.stack_name}-{construct_id}", fifo=fifo
        )
        source_arn = stack.format_arn(
            service="sqs", resource=name, arn_format=ArnFormat.NO_RESOURCE_NAME
        )
        fifo_props: dict[str, Any] = (
            {"fifo": True, "content_based_deduplication": False} if fifo else {}
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            **{
                **fifo_props,
                "encryption": sqs.QueueEncryption.SQS_MANAGED,
                "enforce_ssl": True,
                "retention_period": DLQ_RETENTION,
                "max_message_size_bytes": MAX_MESSAGE_BYTES,
                "redrive_allow_policy": sqs.RedriveAllowPolicy(
                    redrive_permission=sqs.RedrivePermission.BY_QUEUE,
                    source_queues=[sqs.Queue.from_queue_arn(self, "SourceQueueRef", source_arn)],
                ),
                **(dead_letter_queue_props or {}),
                "queue_name": (dead_letter_queue_props or {}).get("queue_name")
                or queue_name(f"{stack.stack_name}-{construct_id}-dlq", fifo=fifo),
            },
        )
        self.dead_letter_queue.apply_removal_policy(removal_policy)
        self.queue = sqs.Queue(
            self,
            "Queue",
            **{
                "queue_name": name,
                **fifo_props,
                "encryption": sqs.QueueEncryption.SQS_MANAGED,
                "enforce_ssl": True,
                "max_message_size_bytes": MAX_MESSAGE_BYTES,
                "visibility_timeout": Duration.seconds(
                    visibility_timeout_seconds(int(timeout.to_seconds()), window_s)
                ),
                "dead_letter_queue": sqs.DeadLetterQueue(
                    queue=self.dead_letter_queue, max_receive_count=max_receive_count
                ),
                **(queue_props or {}),
            },
        )
        self.queue.apply_removal_policy(removal_policy)
        built = store_function(
            self,
            code=code,
            handler=handler,
            description=description or f"Idempotent consumer {construct_id}",
            layer=layer,
            table=table,
            ledger=ledger,
            scope_variable="CONSUMER_SCOPE",
            idempotency_scope=self.idempotency_scope,
            metrics_namespace=metrics_namespace,
            lease_margin=lease_margin,
            block_expired_leases=block_expired_leases,
            environment={
                "DEAD_LETTER_QUEUE_URL": self.dead_letter_queue.queue_url,
                **(environment or {}),
            },
            timeout=timeout,
            memory_size=memory_size,
            options=function_options or FunctionOptions(),
        )
        self.function = built.function
        self.role = built.role
        cast(lambda_.CfnFunction, self.function.node.default_child).add_metadata(
            names.ENTRY_POINT_METADATA, {"kind": names.KIND_CONSUMER, "id": construct_id}
        )
        # The consumer alone batches (acquire_many, finish_many): subscribers and APIs do not.
        table.grant_batches(self.role)
        self._grant_queues()

        self.event_source_mapping = lambda_.EventSourceMapping(
            self,
            "EventSourceMapping",
            **{
                "target": self.function,
                "event_source_arn": self.queue.queue_arn,
                "batch_size": batch_size,
                "max_batching_window": None if fifo else batching_window,
                **(
                    {
                        "provisioned_poller_config": lambda_.ProvisionedPollerConfig(
                            minimum_pollers=min_pollers, maximum_pollers=max_pollers
                        )
                    }
                    if provisioned
                    else {"max_concurrency": max_concurrency or MAX_CONCURRENCY}
                ),
                "report_batch_item_failures": True,
                "metrics_config": lambda_.MetricsConfig(metrics=[lambda_.MetricType.EVENT_COUNT]),
                "enabled": mapping_enabled,
                **(event_source_props or {}),
            },
        )
        # The service reads the queue with the function's role: the mapping needs the role's
        # permissions to exist first.
        self.event_source_mapping.node.add_dependency(self.role)
        self.alarms = self._alarms(alarm_topic, queue_age_alarm, dead_letter_age_alarm)
        if outputs:
            self._outputs(stack)

    def _grant_queues(self) -> None:
        """Written out: `grant_consume_messages` adds more than a consumer uses."""
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ConsumeSourceQueue",
                actions=[
                    "sqs:ReceiveMessage",
                    "sqs:DeleteMessage",
                    "sqs:GetQueueAttributes",
                    "sqs:ChangeMessageVisibility",
                ],
                resources=[self.queue.queue_arn],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="SendPermanentFailuresToDeadLetterQueue",
                actions=["sqs:SendMessage"],
                resources=[self.dead_letter_queue.queue_arn],
            )
        )
        # Queues under a customer-managed key (`encryption=KMS` in the props): receiving needs
        # Decrypt, sending to the DLQ needs GenerateDataKey too; SSE-SQS needs neither. Written
        # out because the keys' `grant_*` helpers add wildcard actions (ReEncrypt*).
        for sid, key, actions in (
            ("DecryptSourceQueue", self.queue.encryption_master_key, ["kms:Decrypt"]),
            (
                "EncryptForDeadLetterQueue",
                self.dead_letter_queue.encryption_master_key,
                ["kms:Decrypt", "kms:GenerateDataKey"],
            ),
        ):
            if key is not None:
                self.role.add_to_policy(
                    iam.PolicyStatement(sid=sid, actions=actions, resources=[key.key_arn])
                )

    def _alarms(
        self, topic: sns.ITopic | None, queue_age: Duration, dead_letter_age: Duration
    ) -> list[cloudwatch.Alarm]:
        name, queue = self.name, self.queue
        specs = dead_letter_alarm_specs(name, self.dead_letter_queue, dead_letter_age)
        specs.append(
            AlarmSpec(
                "QueueAgeAlarm",
                queue.metric_approximate_age_of_oldest_message(
                    period=ALARM_PERIOD, statistic="Maximum"
                ),
                queue_age.to_seconds(),
                f"{name}: the queue is falling behind",
            )
        )
        return function_alarms(self, name, self.function, topic, self.unfinished_work, own=specs)

    def _outputs(self, stack: Stack) -> None:
        values = {
            names.QUEUE_URL: self.queue.queue_url,
            names.QUEUE_ARN: self.queue.queue_arn,
            names.DEAD_LETTER_QUEUE_URL: self.dead_letter_queue.queue_url,
            names.DEAD_LETTER_QUEUE_ARN: self.dead_letter_queue.queue_arn,
            names.FUNCTION_NAME: self.function.function_name,
        }
        for suffix, value in values.items():
            CfnOutput(stack, f"{self.name}{suffix}", value=value)

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        name = self.name
        return [
            cloudwatch.GraphWidget(
                title=f"{name} queue",
                left=[
                    self.queue.metric_approximate_number_of_messages_visible(statistic="Maximum"),
                    self.queue.metric_number_of_messages_deleted(statistic="Sum"),
                ],
                right=[self.queue.metric_approximate_age_of_oldest_message(statistic="Maximum")],
                width=6,
            ),
            dead_letter_queue_widget(name, self.dead_letter_queue),
            function_widget(name, self.function),
            self.unfinished_work.widget(f"{name} started minus finished"),
            event_source_mapping_widget(name, self.event_source_mapping),
            outcome_widget(name, self.metrics_namespace, "consumer", self.idempotency_scope),
        ]
