"""The dashboard graphs every entry point with a function or a dead-letter queue shows alike."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs


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
