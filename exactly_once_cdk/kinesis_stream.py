"""`KinesisStreamConsumer`: an encrypted Kinesis data stream, its consumer function and the event
source mapping between them, with the stream consumers' shared queues, alarms and grants
(`stream_consumer`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from exactly_once_cdk import outputs as names
from exactly_once_cdk.alarms import ALARM_PERIOD, AlarmSpec
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

RETENTION = Duration.hours(24)  # Kinesis's default and its cheapest
# What Lambda's mapping calls on the stream with the function's role (no SubscribeToShard:
# that is enhanced fan-out's, which this mapping does not use).
READ_ACTIONS = (
    "kinesis:DescribeStream",
    "kinesis:DescribeStreamSummary",
    "kinesis:GetRecords",
    "kinesis:GetShardIterator",
    "kinesis:ListShards",
)


class KinesisStreamConsumer(StreamConsumerBase):
    """A Kinesis data stream (one provisioned shard, 24-hour retention) and its consumer.

    Encryption: server-side under the AWS-managed `aws/kinesis` key by default
    (`StreamEncryption.MANAGED`): free, no key policy to keep, and the role needs no KMS grant
    (Kinesis decrypts for any principal the stream itself authorises); cdk-nag's KDS3 asks for
    exactly this key. Give `encryption_key` for a customer-managed key (key control, audit,
    cross-account producers): the function is granted kms:Decrypt on it, and every producer
    needs kms:GenerateDataKey (KMS requests are billed per producer and consumer call).

    Ordering: `parallelization_factor=1` (the default) runs one batch per shard at a time, so
    records run in the shard's order. A factor over 1 (up to 10) runs that many batches of a
    shard at once, keeping the order per partition key only; the handler's per-shard stop on
    a failure then holds within one batch, not across the shard.

    `stream_props` overrides or adds any `kinesis.Stream` keyword (shard count, on-demand
    mode, a longer retention: `max_record_age` must stay under it, checked at synth, or the
    on-failure queue would name records the stream no longer has). `iterator_age_alarm`
    applies both to Lambda's `IteratorAge` and to the stream's
    `GetRecords.IteratorAgeMilliseconds`. Other keywords: `StreamConsumerOptions`.
    """

    source_label = "Kinesis"
    source_kind = "kinesis"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        table: RecordStore,
        layer: lambda_.ILayerVersion,
        encryption_key: kms.IKey | None = None,
        parallelization_factor: int = PARALLELIZATION_FACTOR,
        batching_window: Duration = NO_WINDOW,
        iterator_age_alarm: Duration = ITERATOR_AGE_ALARM,
        stream_props: Mapping[str, Any] | None = None,
        **options: Unpack[StreamConsumerOptions],
    ) -> None:
        super().__init__(scope, construct_id, code=code, table=table, layer=layer, options=options)
        retention: Duration = (stream_props or {}).get("retention_period", RETENTION)
        check_record_age_within_retention(
            construct_id,
            max_record_age_seconds=record_age_seconds(self.max_record_age),
            retention_seconds=int(retention.to_seconds()),
        )
        encryption: dict[str, Any] = (
            {"encryption": kinesis.StreamEncryption.MANAGED}
            if encryption_key is None
            else {"encryption": kinesis.StreamEncryption.KMS, "encryption_key": encryption_key}
        )
        # One provisioned shard unless on-demand mode is asked for, which takes no shard count.
        on_demand = (stream_props or {}).get("stream_mode") == kinesis.StreamMode.ON_DEMAND
        self.stream = kinesis.Stream(
            self,
            "Stream",
            **{
                **({} if on_demand else {"shard_count": 1}),
                "retention_period": RETENTION,
                "removal_policy": options.get("removal_policy", RemovalPolicy.RETAIN),
                **encryption,
                **(stream_props or {}),
            },
        )
        if encryption_key is not None:
            Validations.of(self.stream).acknowledge(
                Acknowledgment(
                    id="AwsSolutions-KDS3",
                    reason="A customer-managed key was asked for (encryption_key): key control "
                    "and audit over the aws/kinesis key's lower cost.",
                )
            )
        # The stream's own key, however it was asked for (`encryption_key`, or a KMS
        # `encryption` in `stream_props`, for which kinesis.Stream creates one).
        self._grant_stream(self.stream.encryption_key)
        self._event_source_mapping(
            {"event_source_arn": self.stream.stream_arn},
            batching_window=batching_window,
            parallelization_factor=parallelization_factor,
        )
        self._finish(
            iterator_age(self.function),
            iterator_age_alarm.to_milliseconds(),
            f"{construct_id}: the function is reading the stream too far behind (IteratorAge)",
            # The stream's own view: the oldest record any GetRecords call returned, so a
            # mapping that stopped invoking the function (no IteratorAge then) still alarms.
            extra=[
                AlarmSpec(
                    "StreamIteratorAgeAlarm",
                    self._stream_age(),
                    iterator_age_alarm.to_milliseconds(),
                    f"{construct_id}: records wait too long in the stream "
                    "(GetRecords.IteratorAgeMilliseconds)",
                )
            ],
        )

    def _grant_stream(self, key: kms.IKey | None) -> None:
        """Written out: `Stream.grant_read` adds ListStreams and the enhanced fan-out actions."""
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadStream", actions=list(READ_ACTIONS), resources=[self.stream.stream_arn]
            )
        )
        if key is not None:
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="DecryptStream", actions=["kms:Decrypt"], resources=[key.key_arn]
                )
            )

    def _stream_age(self) -> cloudwatch.Metric:
        return self.stream.metric_get_records_iterator_age_milliseconds(
            period=ALARM_PERIOD, statistic="Maximum"
        )

    def _output_values(self) -> dict[str, str]:
        return {
            **super()._output_values(),
            names.STREAM_NAME: self.stream.stream_name,
            names.STREAM_ARN: self.stream.stream_arn,
        }

    def lag_metrics(self) -> list[cloudwatch.IMetric]:
        return [*super().lag_metrics(), self._stream_age()]
