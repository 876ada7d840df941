"""The idempotency table (one for every consumer) and the append-only ledger of side effects."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from exactly_once import schema

LEDGER_PARTITION_KEY = "pk"  # the business key
LEDGER_SORT_KEY = "sk"  # record_effect: "{scope}#{name}", once per key; append_entry: unique


def _table(
    scope: Construct,
    construct_id: str,
    *,
    partition_key: dynamodb.Attribute,
    sort_key: dynamodb.Attribute | None = None,
    ttl: str | None = None,
    prod: bool,
) -> dynamodb.Table:
    """On-demand, encrypted, point-in-time recoverable; kept on stack deletion in prod."""
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=partition_key,
        sort_key=sort_key,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        time_to_live_attribute=ttl,
        removal_policy=RemovalPolicy.RETAIN if prod else RemovalPolicy.DESTROY,
        deletion_protection=prod,
    )


class Tables(Construct):
    """`idempotency`: records keyed by "{scope}#{key}" with the sparse pending index.

    `ledger`: pk/sk items written once per executed side effect, to prove exactly-once.
    """

    def __init__(self, scope: Construct, construct_id: str, *, prod: bool) -> None:
        super().__init__(scope, construct_id)
        self.idempotency = _table(
            self,
            "Idempotency",
            partition_key=dynamodb.Attribute(
                name=schema.PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            ttl=schema.TTL,
            prod=prod,
        )
        # Sparse: only IN_PROGRESS and FAILED records carry the keys, so the monitor and the
        # operator tools find stuck and failed work without scanning completed records.
        self.idempotency.add_global_secondary_index(
            index_name=schema.PENDING_INDEX,
            partition_key=dynamodb.Attribute(
                name=schema.PENDING_SHARD, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=schema.PENDING_AT, type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        self.ledger = _table(
            self,
            "Ledger",
            partition_key=dynamodb.Attribute(
                name=LEDGER_PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=LEDGER_SORT_KEY, type=dynamodb.AttributeType.STRING),
            prod=prod,
        )

    @property
    def pending_index_arn(self) -> str:
        return f"{self.idempotency.table_arn}/index/{schema.PENDING_INDEX}"
