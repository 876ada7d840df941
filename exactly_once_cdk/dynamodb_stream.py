"""`DynamoDbStreamConsumer`: a consumer of a DynamoDB table's stream (the table is yours), with
the stream consumers' shared queues, alarms and grants (`stream_consumer`).

The handler's payload is a record's new image, else its old one (a REMOVE), else its keys: a
stream with `NEW_IMAGE` or `NEW_AND_OLD_IMAGES` gives it the whole item, `KEYS_ONLY` the keys.
"""

from __future__ import annotations

from typing import Unpack

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from exactly_once_cdk.consumer import NO_WINDOW
from exactly_once_cdk.record_store import RecordStore
from exactly_once_cdk.stream_alarms import iterator_age
from exactly_once_cdk.stream_consumer import (
    ITERATOR_AGE_ALARM,
    PARALLELIZATION_FACTOR,
    StreamConsumerBase,
    StreamConsumerOptions,
)
from exactly_once_cdk.stream_rules import check_record_age_within_retention, record_age_seconds

RETENTION_SECONDS = 24 * 3600  # DynamoDB Streams keep a change 24 hours, not configurable
# What Lambda's mapping calls on the table's stream with the function's role.
READ_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
)


class DynamoDbStreamConsumer(StreamConsumerBase):
    """The consumer of `source_table`'s stream; `table` stays the idempotency store.

    DynamoDB Streams keep records 24 hours: the default `max_record_age` (6 hours) leaves 18 to
    read a given-up batch back from the positions in the on-failure queue. One shard per batch:
    `parallelization_factor=1` (the default) keeps the shard's order; over 1 (up to 10) keeps
    the order per item key only. `iterator_age_alarm` is on Lambda's `IteratorAge`. Other
    keywords: `StreamConsumerOptions`.
    """

    source_label = "DynamoDB Streams"
    source_kind = "dynamodb"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        source_table: dynamodb.ITable,
        code: lambda_.Code,
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        parallelization_factor: int = PARALLELIZATION_FACTOR,
        batching_window: Duration = NO_WINDOW,
        iterator_age_alarm: Duration = ITERATOR_AGE_ALARM,
        **options: Unpack[StreamConsumerOptions],
    ) -> None:
        stream_arn = source_table.table_stream_arn
        if stream_arn is None:
            raise ValueError(
                f"{construct_id}: the source table has no stream; give it "
                "stream=StreamViewType.NEW_IMAGE (or NEW_AND_OLD_IMAGES)"
            )
        super().__init__(scope, construct_id, code=code, table=table, layer=layer, options=options)
        check_record_age_within_retention(
            construct_id,
            max_record_age_seconds=record_age_seconds(self.max_record_age),
            retention_seconds=RETENTION_SECONDS,
        )
        self.source_table = source_table
        self._grant_stream(source_table, stream_arn)
        self._event_source_mapping(
            {"event_source_arn": stream_arn},
            batching_window=batching_window,
            parallelization_factor=parallelization_factor,
        )
        self._finish(
            iterator_age(self.function),
            iterator_age_alarm.to_milliseconds(),
            f"{construct_id}: the function is reading the table's stream too far behind "
            "(IteratorAge)",
        )

    def _grant_stream(self, source_table: dynamodb.ITable, stream_arn: str) -> None:
        """Written out: `grant_stream_read` is the same, but says nothing of why ListStreams is
        unscoped."""
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadTableStream", actions=list(READ_ACTIONS), resources=[stream_arn]
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ListTableStreams", actions=["dynamodb:ListStreams"], resources=["*"]
            )
        )
        Validations.of(self.role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="Lambda's DynamoDB Streams mapping calls dynamodb:ListStreams with the "
                "function's role (Lambda developer guide, AWSLambdaDynamoDBExecutionRole), and "
                "ListStreams supports no resource-level permissions; ListTableStreams is the "
                "only statement on Resource '*' and lists stream ARNs, no data.",
            )
        )
        key = source_table.encryption_key
        if key is not None:  # a table under a customer-managed key: its stream is too
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="DecryptTableStream", actions=["kms:Decrypt"], resources=[key.key_arn]
                )
            )
