"""The alarms and dashboard graphs every stream consumer adds to an entry point's (Kinesis,
DynamoDB Streams and Kafka alike): how far behind the mapping reads, what it gave up on (the
on-failure destination) and what the handler dead-lettered (the DLQ)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from exactly_once_cdk.alarms import ALARM_PERIOD, ONE_EVENT, AlarmSpec, dead_letter_alarm_specs

# A stream mapping's EventCount metrics (no DeletedEventCount: nothing is deleted from a stream).
STREAM_MAPPING_METRICS = (
    "PolledEventCount",
    "InvokedEventCount",
    "FailedInvokeEventCount",
    "DroppedEventCount",
    "OnFailureDestinationDeliveredEventCount",
)


def iterator_age(function: lambda_.IFunction) -> cloudwatch.Metric:
    """Lambda's `IteratorAge` (ms): the age of the last record of each batch the function got,
    for Kinesis and DynamoDB Streams mappings."""
    return function.metric("IteratorAge", period=ALARM_PERIOD, statistic="Maximum")


def offset_lag(function: lambda_.IFunction) -> cloudwatch.Metric:
    """Lambda's `OffsetLag` (records) for Kafka mappings: how far the consumer group's committed
    offsets trail the topic's latest, Kafka's counterpart of the iterator age."""
    return function.metric("OffsetLag", period=ALARM_PERIOD, statistic="Maximum")


def stream_alarm_specs(
    name: str,
    *,
    function: lambda_.IFunction,
    lag: cloudwatch.IMetric,
    lag_threshold: float,
    lag_description: str,
    on_failure_queue: sqs.IQueue,
    dead_letter_queue: sqs.IQueue,
    dead_letter_age: Duration,
) -> list[AlarmSpec]:
    """A consumer's own alarms before `function_alarms` adds errors, throttles and unfinished
    work: its lag (sustained), the handler's DLQ (one message, and one waiting too long), the
    mapping's on-failure destination (one message: a record given up unread by the handler)
    and a failed delivery to that destination (one: a record's position lost)."""
    specs = [AlarmSpec("IteratorAgeAlarm", lag, lag_threshold, lag_description)]
    specs += dead_letter_alarm_specs(name, dead_letter_queue, dead_letter_age)
    specs += [
        AlarmSpec(
            "OnFailureQueueNotEmptyAlarm",
            on_failure_queue.metric_approximate_number_of_messages_visible(
                period=ALARM_PERIOD, statistic="Maximum"
            ),
            1,
            f"{name}: the event source mapping gave records up (retries or record age "
            "exhausted): their positions wait in the on-failure queue",
            ONE_EVENT,
        ),
        AlarmSpec(
            "DestinationDeliveryFailuresAlarm",
            function.metric("DestinationDeliveryFailures", period=ALARM_PERIOD, statistic="Sum"),
            1,
            f"{name}: Lambda could not send a given-up batch to the on-failure queue (lost)",
            ONE_EVENT,
        ),
    ]
    return specs


def on_failure_widget(name: str, queue: sqs.IQueue) -> cloudwatch.GraphWidget:
    """Given-up batches waiting in the on-failure queue, with the oldest one's age."""
    return cloudwatch.GraphWidget(
        title=f"{name} on-failure queue",
        left=[queue.metric_approximate_number_of_messages_visible(statistic="Maximum")],
        right=[queue.metric_approximate_age_of_oldest_message(statistic="Maximum")],
        width=6,
    )
