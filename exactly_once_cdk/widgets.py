"""The dashboard graphs entry points show alike: function, dead-letter queue, event source
mapping and the handler's outcome counts."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from exactly_once.observability import METRIC_NAMES

# Every count `emit_batch_metrics` writes: one per outcome, then takeovers and dead letters.
OUTCOME_METRICS = (*METRIC_NAMES.values(), "Takeovers", "DeadLettered")


def function_widget(name: str, function: lambda_.IFunction) -> cloudwatch.GraphWidget:
    """Invocations, errors and throttles, with the p99 duration on the right."""
    return cloudwatch.GraphWidget(
        title=f"{name} function",
        left=[
            function.metric_invocations(statistic="Sum"),
            function.metric_errors(statistic="Sum"),
            function.metric_throttles(statistic="Sum"),
        ],
        right=[function.metric_duration(statistic="p99")],
        width=6,
    )


def dead_letter_queue_widget(name: str, dlq: sqs.IQueue) -> cloudwatch.GraphWidget:
    """Messages waiting in the dead-letter queue, with the oldest one's age on the right."""
    return cloudwatch.GraphWidget(
        title=f"{name} dead-letter queue",
        left=[dlq.metric_approximate_number_of_messages_visible(statistic="Maximum")],
        right=[dlq.metric_approximate_age_of_oldest_message(statistic="Maximum")],
        width=6,
    )


# The event source mapping's own counts (`MetricsConfig: EventCount`), in the order a message
# moves through it: polled, invoked, failed, deleted from the queue, dropped.
EVENT_SOURCE_MAPPING_METRICS = (
    "PolledEventCount",
    "InvokedEventCount",
    "FailedInvokeEventCount",
    "DeletedEventCount",
    "DroppedEventCount",
)


def event_source_mapping_widget(
    name: str,
    mapping: lambda_.IEventSourceMapping,
    metrics: tuple[str, ...] = EVENT_SOURCE_MAPPING_METRICS,
) -> cloudwatch.GraphWidget:
    """What the mapping did with the queue's messages or the stream's records (AWS/Lambda, per
    mapping UUID); `metrics` are the EventCount metrics its source has."""
    return cloudwatch.GraphWidget(
        title=f"{name} event source mapping",
        left=[
            cloudwatch.Metric(
                namespace="AWS/Lambda",
                metric_name=metric,
                dimensions_map={"EventSourceMappingUUID": mapping.event_source_mapping_id},
                statistic="Sum",
            )
            for metric in metrics
        ],
        width=6,
    )


def outcome_widget(name: str, namespace: str, dimension: str, scope: str) -> cloudwatch.GraphWidget:
    """The handler's own outcome counts (exactly_once.observability's EMF: one document per
    batch under `{dimension}=scope` and `service=scope`, POWERTOOLS_SERVICE_NAME)."""
    return cloudwatch.GraphWidget(
        title=f"{name} outcomes",
        left=[
            cloudwatch.Metric(
                namespace=namespace,
                metric_name=metric,
                dimensions_map={dimension: scope, "service": scope},
                statistic="Sum",
            )
            for metric in OUTCOME_METRICS
        ],
        width=6,
    )
