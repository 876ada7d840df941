"""The idempotency table (one for every consumer) and the append-only ledger of side effects.

Both are `dynamodb.Table`s with secure defaults (on demand, encrypted, point-in-time recovery,
kept on stack deletion, deletion protection); every `TableProps` keyword overrides them. The
ledger's items expire through TTL (`exactly_once.ledger` writes the attribute); the
idempotency table takes an optional warm throughput for a known launch-day burst.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from constructs import Construct

from exactly_once.stores import schema
from exactly_once_cdk import outputs
from exactly_once_cdk.alarms import ALARM_PERIOD, SUSTAINED, add_alarm

LEDGER_PARTITION_KEY = "pk"  # the business key
LEDGER_SORT_KEY = "sk"  # record_effect: "{scope}#{name}", once per key; append_entry: unique
LEDGER_TTL = "expires_at"  # exactly_once.ledger.TTL_ATTRIBUTE (checked in the template tests)

# Item-level actions only: `grant_read_write_data` would add Scan, Query and the batch calls.
# Exactly what the store calls (tests/infra/test_record_actions.py derives the set by running
# it): GetItem (get), UpdateItem (acquire, complete, fail, extend, release, and the fenced
# effect's transactional update), PutItem (acquire's `_renew`: a TTL-expired record replaced
# whole by a new generation). No DeleteItem: records leave through TTL only.
RECORD_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)
# A batch's PartiQL (`acquire_many`, `finish_many`: the SQS consumer's path, nobody else's). IAM
# authorises a BatchExecuteStatement statement by statement: INSERT for a new key, conditional
# UPDATE for a seen one and for every completion. No PartiQLSelect or PartiQLDelete: the batch
# never reads or deletes. Without these the store still works, one call per key.
BATCH_ACTIONS = (
    "dynamodb:PartiQLInsert",
    "dynamodb:PartiQLUpdate",
)


def _defaults(removal_policy: RemovalPolicy) -> dict[str, Any]:
    return {
        "billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST,
        "encryption": dynamodb.TableEncryption.AWS_MANAGED,
        "point_in_time_recovery_specification": dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        "removal_policy": removal_policy,
        "deletion_protection": removal_policy == RemovalPolicy.RETAIN,
    }


class _AlarmedTable(dynamodb.Table):
    """A table with the secure defaults, its own key schema, an optional stack output naming
    it, and a throttle alarm on request."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        keys: dict[str, Any],
        removal_policy: RemovalPolicy,
        output_name: str | None,
        table_props: dict[str, Any],
    ) -> None:
        super().__init__(
            scope, construct_id, **{**_defaults(removal_policy), **keys, **table_props}
        )
        if output_name is not None:
            CfnOutput(Stack.of(self), output_name, value=self.table_name)

    def throttle_alarm(self, label: str, alarm_topic: sns.ITopic | None = None) -> cloudwatch.Alarm:
        """An alarm on read or write throttle events (DynamoDB's own metrics), sustained."""
        return self._throttle_alarm(
            "ThrottlesAlarm",
            self.metric("ReadThrottleEvents", statistic="Sum"),
            self.metric("WriteThrottleEvents", statistic="Sum"),
            f"{label} throttle events",
            f"{label} table requests were throttled",
            alarm_topic,
        )

    def throttle_metrics(self, label: str) -> list[cloudwatch.IMetric]:
        return [
            self.metric(name, statistic="Sum", label=f"{label} {name}")
            for name in ("ReadThrottleEvents", "WriteThrottleEvents")
        ]

    def _throttle_alarm(
        self,
        construct_id: str,
        reads: cloudwatch.IMetric,
        writes: cloudwatch.IMetric,
        label: str,
        description: str,
        alarm_topic: sns.ITopic | None,
    ) -> cloudwatch.Alarm:
        throttles = cloudwatch.MathExpression(
            expression="FILL(reads, 0) + FILL(writes, 0)",
            using_metrics={"reads": reads, "writes": writes},
            label=label,
            period=ALARM_PERIOD,
        )
        return add_alarm(
            self,
            construct_id,
            metric=throttles,
            threshold=1,
            description=description,
            topic=alarm_topic,
            # The SDK and SQS retry a throttled request: one period of them is noise.
            evaluation_periods=SUSTAINED.periods,
            datapoints_to_alarm=SUSTAINED.datapoints,
        )


class IdempotencyTable(_AlarmedTable):
    """Records keyed by "{scope}#{key}", TTL on `expires_at`, and the sparse pending index.

    The index holds only IN_PROGRESS and FAILED records, so the monitor and the CLI find stuck
    and failed work without scanning completed records. With `output`, the stack gets an
    `IdempotencyTableName` output, which is how `eonce locks` finds the table.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        output: bool = True,
        warm_throughput: dynamodb.WarmThroughput | None = None,
        **table_props: Any,
    ) -> None:
        """`warm_throughput`: read and write units per second the on-demand table can serve at
        once (billed when raised); None leaves it to DynamoDB."""
        keys: dict[str, Any] = {
            "partition_key": dynamodb.Attribute(
                name=schema.PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            "time_to_live_attribute": schema.TTL,
        }
        if warm_throughput is not None:
            keys["warm_throughput"] = warm_throughput
        super().__init__(
            scope,
            construct_id,
            keys=keys,
            removal_policy=removal_policy,
            output_name=outputs.IDEMPOTENCY_TABLE if output else None,
            table_props=table_props,
        )
        self.add_global_secondary_index(
            index_name=schema.PENDING_INDEX,
            partition_key=dynamodb.Attribute(
                name=schema.PENDING_SHARD, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=schema.PENDING_AT, type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.ALL,
        )

    @property
    def pending_index_arn(self) -> str:
        return f"{self.table_arn}/index/{schema.PENDING_INDEX}"

    def _index_metric(self, name: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/DynamoDB",
            metric_name=name,
            dimensions_map={
                "TableName": self.table_name,
                "GlobalSecondaryIndexName": schema.PENDING_INDEX,
            },
            statistic="Sum",
            period=ALARM_PERIOD,
            label=f"{schema.PENDING_INDEX} {name}",
        )

    def transaction_conflicts(self) -> cloudwatch.Metric:
        """Transactions refused because another request changed one of their items at once
        (the fenced effect writes its mark here in a TransactWriteItems)."""
        return self.metric("TransactionConflict", statistic="Sum", period=ALARM_PERIOD)

    def alarms(self, label: str, alarm_topic: sns.ITopic | None = None) -> list[cloudwatch.Alarm]:
        """Table throttles, pending-index throttles (a throttled index write throttles the
        table's writes too) and transaction conflicts, each sustained over 2 of 3 periods."""
        return [
            self.throttle_alarm(label, alarm_topic),
            self._throttle_alarm(
                "PendingIndexThrottlesAlarm",
                self._index_metric("ReadThrottleEvents"),
                self._index_metric("WriteThrottleEvents"),
                f"{label} {schema.PENDING_INDEX} throttle events",
                f"{label} table: its {schema.PENDING_INDEX} index throttled requests",
                alarm_topic,
            ),
            add_alarm(
                self,
                "TransactionConflictAlarm",
                metric=self.transaction_conflicts(),
                threshold=1,
                description=f"{label} table: fenced-effect transactions conflicted with "
                "concurrent writes to the same record",
                topic=alarm_topic,
                evaluation_periods=SUSTAINED.periods,
                datapoints_to_alarm=SUSTAINED.datapoints,
            ),
        ]

    def index_and_transaction_metrics(self) -> list[cloudwatch.IMetric]:
        """For the dashboard: the pending index's throttles and the transaction conflicts."""
        return [
            self._index_metric("ReadThrottleEvents"),
            self._index_metric("WriteThrottleEvents"),
            self.transaction_conflicts(),
        ]

    # The `RecordStore` shape (record_store.py), shared with `IdempotencyDatabase`.
    @property
    def function_environment(self) -> Mapping[str, str]:
        return {"IDEMPOTENCY_TABLE": self.table_name}

    @property
    def function_network(self) -> Mapping[str, Any]:
        """Nothing: DynamoDB is reached over its public endpoint, no VPC needed."""
        return {}

    def wait_for_schema(self, function: Construct) -> None:
        """Nothing to wait for: the table's keys and index are the whole schema."""

    def grant_records(self, grantee: iam.IGrantable) -> None:
        """What a consumer's function needs: read and write single records, nothing more."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="IdempotencyRecords", actions=list(RECORD_ACTIONS), resources=[self.table_arn]
            )
        )

    def grant_batches(self, grantee: iam.IGrantable) -> None:
        """What a batching function (the SQS consumer) needs on top of `grant_records`: a
        batch's PartiQL INSERTs and UPDATEs on the same table."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="IdempotencyBatches", actions=list(BATCH_ACTIONS), resources=[self.table_arn]
            )
        )

    def grant_pending_query(self, grantee: iam.IGrantable) -> None:
        """What the monitor and the CLI's `locks list` need: Query on the pending index."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadPendingIndex",
                actions=["dynamodb:Query"],
                resources=[self.pending_index_arn],
            )
        )


class LedgerTable(_AlarmedTable):
    """pk/sk items written once per executed side effect (`exactly_once.ledger`), expiring
    through TTL on `expires_at`.

    With `output`, the stack gets a `LedgerTableName` output.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        output: bool = True,
        **table_props: Any,
    ) -> None:
        keys = {
            "partition_key": dynamodb.Attribute(
                name=LEDGER_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            "sort_key": dynamodb.Attribute(
                name=LEDGER_SORT_KEY, type=dynamodb.AttributeType.STRING
            ),
            # Written by exactly_once.ledger (LEDGER_RETENTION_DAYS, 365 by default): record_effect
            # guards a key's effect only while its entry exists.
            "time_to_live_attribute": LEDGER_TTL,
        }
        super().__init__(
            scope,
            construct_id,
            keys=keys,
            removal_policy=removal_policy,
            output_name=outputs.LEDGER_TABLE if output else None,
            table_props=table_props,
        )

    def grant_append(self, grantee: iam.IGrantable) -> None:
        """PutItem only: the ledger is append-only, conditioned writes do the rest."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="LedgerAppend", actions=["dynamodb:PutItem"], resources=[self.table_arn]
            )
        )
