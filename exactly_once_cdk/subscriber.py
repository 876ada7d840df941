"""`IdempotentSubscriber`: a Lambda function subscribed directly to an SNS topic, its own
dead-letter queue, the asynchronous-invocation settings, alarms and outputs.

SNS invokes the function asynchronously. A failure the handler cannot settle raises (after
the FAILED record is written): Lambda retries it `retry_attempts` times, then sends it to the
on-failure destination. One encrypted, SSL-only queue catches all three kinds of loss, each in
its own shape:
- the handler's permanent failures (`DEAD_LETTER_QUEUE_URL`): the SNS Message as the body,
  with `eo-error-type` and `eo-error-message` attributes;
- Lambda's on-failure destination: the invocation record (`requestPayload` is the SNS event,
  `requestContext.condition` says RetriesExhausted or EventAgeExceeded);
- the subscription's RedrivePolicy: the SNS message SNS itself could not deliver (the
  function missing, a permission refused, Lambda throttling the Invoke call for days).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import jsii
from aws_cdk import Acknowledgment, CfnOutput, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from exactly_once_cdk import outputs as names
from exactly_once_cdk.alarms import (
    ALARM_PERIOD,
    ONE_EVENT,
    AlarmSpec,
    dead_letter_alarm_specs,
    function_alarms,
)
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
from exactly_once_cdk.tables import LedgerTable
from exactly_once_cdk.unfinished_work import THRESHOLD as UNFINISHED_THRESHOLD
from exactly_once_cdk.unfinished_work import WINDOW as UNFINISHED_WINDOW
from exactly_once_cdk.unfinished_work import UnfinishedWork
from exactly_once_cdk.widgets import dead_letter_queue_widget, function_widget, outcome_widget

RETRY_ATTEMPTS = 2  # Lambda's default and maximum for asynchronous invocations
MAX_EVENT_AGE = Duration.hours(6)  # Lambda's default and maximum
MIN_EVENT_AGE = Duration.seconds(60)
SNS_PRINCIPAL = "sns.amazonaws.com"


@jsii.implements(lambda_.IDestination)
class _QueueDestination:
    """An SQS on-failure destination that grants nothing: `SqsDestination` grants
    GetQueueAttributes and GetQueueUrl too, and the role already has its one statement."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self._queue = queue

    def bind(
        self, scope: Construct, fn: lambda_.IFunction, *, type: lambda_.DestinationType
    ) -> lambda_.DestinationConfig:
        return lambda_.DestinationConfig(destination=self._queue.queue_arn)


def check_async(construct_id: str, retry_attempts: int, max_event_age: Duration) -> None:
    if not 0 <= retry_attempts <= RETRY_ATTEMPTS:
        raise ValueError(f"{construct_id}: retry_attempts {retry_attempts} is outside 0..2")
    seconds = max_event_age.to_seconds()
    if not MIN_EVENT_AGE.to_seconds() <= seconds <= MAX_EVENT_AGE.to_seconds():
        raise ValueError(f"{construct_id}: max_event_age {seconds:g} s is outside 60..21600 s")


class IdempotentSubscriber(Construct):
    """One direct subscriber: its function, DLQ, subscription and asynchronous-invocation
    config; the table and layer are shared. `table` is the idempotency store: an
    `IdempotencyTable` (DynamoDB) or an `IdempotencyDatabase` (PostgreSQL, in its VPC).

    `code` and `handler` are your function (a handler wrapped in `exactly_once.sns_subscriber`).
    `idempotency_scope` is the first half of every record id (`SUBSCRIBER_SCOPE`); it defaults
    to the construct id in lower case. `retry_attempts` (0-2) and `max_event_age` are Lambda's
    asynchronous retries before the on-failure destination.

    With `subscribe=False` the function, its DLQ, grants, asynchronous config, alarms and
    outputs are made, but no subscription: for emulators whose SNS would invoke the function
    itself (moto, which needs Docker for that), where a local runner delivers instead. Left
    unset, `subscribe` follows the app's `localStack` context (`exactly_once_cdk.local_mode`).
    With `outputs`, the stack gets `<Id>FunctionName`, `<Id>DeadLetterQueueUrl` and
    `<Id>DeadLetterQueueArn`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        topic: sns.ITopic,
        code: lambda_.Code,
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        handler: str = "handler.handle",
        idempotency_scope: str | None = None,
        description: str | None = None,
        ledger: LedgerTable | None = None,
        block_expired_leases: bool = False,
        environment: Mapping[str, str] | None = None,
        timeout: Duration = TIMEOUT,
        memory_size: int = 256,
        lease_margin: Duration = LEASE_MARGIN,
        retry_attempts: int = RETRY_ATTEMPTS,
        max_event_age: Duration = MAX_EVENT_AGE,
        filter_policy: Mapping[str, sns.SubscriptionFilter] | None = None,
        subscribe: bool | None = None,
        alarm_topic: sns.ITopic | None = None,
        dead_letter_age_alarm: Duration = DEAD_LETTER_AGE_ALARM,
        unfinished_window: Duration = UNFINISHED_WINDOW,
        unfinished_threshold: float = UNFINISHED_THRESHOLD,
        function_options: FunctionOptions | None = None,
        outputs: bool = True,
        metrics_namespace: str = METRICS_NAMESPACE,
        dead_letter_queue_props: Mapping[str, Any] | None = None,
        dead_letter_removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
    ) -> None:
        super().__init__(scope, construct_id)
        check_async(construct_id, retry_attempts, max_event_age)
        self.name = construct_id
        self.metrics_namespace = metrics_namespace
        self.idempotency_scope = idempotency_scope or construct_id.lower()
        self.unfinished_work = UnfinishedWork(
            metrics_namespace, self.idempotency_scope, unfinished_window, unfinished_threshold
        )
        stack = Stack.of(self)
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            **{
                "queue_name": queue_name(f"{stack.stack_name}-{construct_id}-dlq", fifo=False),
                "encryption": sqs.QueueEncryption.SQS_MANAGED,
                "enforce_ssl": True,
                "retention_period": DLQ_RETENTION,
                # Lambda's on-failure record wraps the whole SNS event (its message, attributes
                # and the error): at SQS's 1 MiB it is never refused for its size.
                "max_message_size_bytes": MAX_MESSAGE_BYTES,
                # Nothing redrives into this queue from another queue.
                "redrive_allow_policy": sqs.RedriveAllowPolicy(
                    redrive_permission=sqs.RedrivePermission.DENY_ALL
                ),
                **(dead_letter_queue_props or {}),
            },
        )
        # RETAIN (the default) keeps the dead letters when the stack is deleted.
        self.dead_letter_queue.apply_removal_policy(dead_letter_removal_policy)
        Validations.of(self.dead_letter_queue).acknowledge(
            Acknowledgment(
                id="AwsSolutions-SQS3",
                reason="This queue is the dead-letter queue: the SNS subscription's "
                "RedrivePolicy, the function's asynchronous on-failure destination and the "
                "handler's permanent failures end here; cdk-nag recognizes only SQS redrive "
                "policies and Lambda DeadLetterConfig as dead-letter use.",
            )
        )
        built = store_function(
            self,
            code=code,
            handler=handler,
            description=description or f"Idempotent SNS subscriber {construct_id}",
            layer=layer,
            table=table,
            ledger=ledger,
            scope_variable="SUBSCRIBER_SCOPE",
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
        self._grant_dead_letter_queue(topic)

        self.event_invoke_config = lambda_.EventInvokeConfig(
            self,
            "AsyncInvokeConfig",
            function=self.function,
            retry_attempts=retry_attempts,
            max_event_age=max_event_age,
            on_failure=_QueueDestination(self.dead_letter_queue),
        )
        # Lambda checks that the role may send to the destination when the config is made.
        self.event_invoke_config.node.add_dependency(self.role)
        self.subscription: sns.Subscription | None = None
        if subscribe is None:  # the emulator delivers to the code itself
            subscribe = not on_local_stack(self)
        if subscribe:
            self.subscription = topic.add_subscription(
                subscriptions.LambdaSubscription(
                    self.function,
                    dead_letter_queue=self.dead_letter_queue,
                    filter_policy=dict(filter_policy) if filter_policy else None,
                )
            )
        # Without its subscription the template does not say which topic: the metadata does.
        metadata: dict[str, Any] = {"kind": names.KIND_SUBSCRIBER, "id": construct_id}
        if not subscribe:
            metadata["topic"] = topic.topic_arn
        cast(lambda_.CfnFunction, self.function.node.default_child).add_metadata(
            names.ENTRY_POINT_METADATA, metadata
        )
        self.alarms = self._alarms(alarm_topic, dead_letter_age_alarm)
        if outputs:
            self._outputs(stack)

    def _grant_dead_letter_queue(self, topic: sns.ITopic) -> None:
        """One statement serves the handler's permanent failures and Lambda's on-failure
        destination, which sends with the function's role. SNS gets its own statement in the
        queue policy from the subscription."""
        dlq = self.dead_letter_queue
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="SendFailuresToDeadLetterQueue",
                actions=["sqs:SendMessage"],
                resources=[dlq.queue_arn],
            )
        )
        key = dlq.encryption_master_key
        if key is None:  # SSE-SQS: neither the role nor SNS needs a key grant
            return
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="EncryptForDeadLetterQueue",
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[key.key_arn],
            )
        )
        # SNS encrypts what it dead-letters with the queue's key; an imported key's policy is
        # its owner's to change (this adds nothing then).
        key.add_to_resource_policy(
            iam.PolicyStatement(
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                principals=[iam.ServicePrincipal(SNS_PRINCIPAL)],
                resources=["*"],  # in a key policy "*" means this key
                conditions={"ArnEquals": {"aws:SourceArn": topic.topic_arn}},
            )
        )

    def _alarms(
        self, topic: sns.ITopic | None, dead_letter_age: Duration
    ) -> list[cloudwatch.Alarm]:
        name = self.name
        specs = dead_letter_alarm_specs(name, self.dead_letter_queue, dead_letter_age)
        specs.append(
            AlarmSpec(
                "DestinationDeliveryFailuresAlarm",
                self.function.metric(
                    "DestinationDeliveryFailures", period=ALARM_PERIOD, statistic="Sum"
                ),
                1,
                f"{name}: Lambda could not send a failed event to the dead-letter queue (lost)",
                ONE_EVENT,
            )
        )
        return function_alarms(self, name, self.function, topic, self.unfinished_work, own=specs)

    def _outputs(self, stack: Stack) -> None:
        values = {
            names.FUNCTION_NAME: self.function.function_name,
            names.DEAD_LETTER_QUEUE_URL: self.dead_letter_queue.queue_url,
            names.DEAD_LETTER_QUEUE_ARN: self.dead_letter_queue.queue_arn,
        }
        for suffix, value in values.items():
            CfnOutput(stack, f"{self.name}{suffix}", value=value)

    def dashboard_widgets(self) -> list[cloudwatch.IWidget]:
        name, fn, dlq = self.name, self.function, self.dead_letter_queue
        return [
            dead_letter_queue_widget(name, dlq),
            function_widget(name, fn),
            cloudwatch.GraphWidget(
                title=f"{name} asynchronous invocations",
                left=[
                    fn.metric("AsyncEventsReceived", statistic="Sum"),
                    fn.metric("AsyncEventsDropped", statistic="Sum"),
                    fn.metric("DestinationDeliveryFailures", statistic="Sum"),
                ],
                right=[fn.metric("AsyncEventAge", statistic="Maximum")],
                width=6,
            ),
            self.unfinished_work.widget(f"{name} started minus finished"),
            outcome_widget(name, self.metrics_namespace, "subscriber", self.idempotency_scope),
        ]
