"""Billing: two exactly-once consumers (Invoices, Refunds), a topic of their own (Billing)
that fans out to both queues and to a direct subscriber (Audit), and the app's own tables.

Written against the constructs' public API only, with none of the local-only switches
(`mapping_enabled`, `create_api`, `inline`, `subscribe`): the constructs follow the local
emulator by themselves. The stack keeps the default synthesizer, as a user's app does.

Effects: the consumers append one fenced ledger entry per execution (`append_effect` into the
`Effects` ledger); the subscriber writes one item per execution into `Notices`, a plain
DynamoDB table the app owns. Both are keyed by business key first, so a key that ran twice
shows as two entries.
"""

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from exactly_once_cdk import (
    ExactlyOnceLayer,
    IdempotencyTable,
    IdempotentConsumer,
    IdempotentSubscriber,
    IdempotentTopic,
    LedgerTable,
)

LAMBDAS = Path(__file__).resolve().parent.parent / "lambdas"
EXCLUDES = ["__pycache__", "*.pyc"]


def code(folder: str) -> lambda_.Code:
    return lambda_.Code.from_asset(str(LAMBDAS / folder), exclude=EXCLUDES)


class BillingStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        records = IdempotencyTable(self, "Records", removal_policy=RemovalPolicy.DESTROY)
        effects = LedgerTable(self, "Effects", removal_policy=RemovalPolicy.DESTROY)
        notices = dynamodb.Table(
            self,
            "Notices",
            partition_key=dynamodb.Attribute(name="eventId", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="execution", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            removal_policy=RemovalPolicy.DESTROY,
        )
        layer = ExactlyOnceLayer(self, "Layer", removal_policy=RemovalPolicy.DESTROY)
        shared: dict[str, Any] = {"table": records, "layer": layer, "ledger": effects}
        # Handler modules named unlike the construct ids; Invoices brings a vendored package
        # (centsmath) in its own code folder.
        invoices = IdempotentConsumer(
            self,
            "Invoices",
            code=code("invoicing"),
            handler="invoice_handler.consume",
            description="Invoices, keyed by invoiceId",
            removal_policy=RemovalPolicy.DESTROY,
            **shared,
        )
        refunds = IdempotentConsumer(
            self,
            "Refunds",
            code=code("refunds"),
            handler="refund_worker.process",
            idempotency_scope="refunds-v2",
            description="Refunds, keyed by refundId",
            removal_policy=RemovalPolicy.DESTROY,
            **shared,
        )
        billing = IdempotentTopic(self, "Billing", removal_policy=RemovalPolicy.DESTROY)
        billing.subscribe_queue(invoices)
        billing.subscribe_queue(refunds)
        audit = IdempotentSubscriber(
            self,
            "Audit",
            topic=billing.topic,
            code=code("audit"),
            handler="audit_trail.note",
            environment={"NOTICES_TABLE": notices.table_name},
            dead_letter_removal_policy=RemovalPolicy.DESTROY,
            **shared,
        )
        notices.grant_write_data(audit.function)
        CfnOutput(self, "NoticesTableName", value=notices.table_name)
