"""A CDK app whose one consumer reads a DynamoDB table's stream: `eonce up --app` must poll it
(tests/e2e/test_up_table_streams.py). Orders written to the `Orders` table (in DynamoDB Local,
where the local stack mirrors it with its stream) run the consumer once per orderId."""

from pathlib import Path

from aws_cdk import App, CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk import DynamoDbStreamConsumer, ExactlyOnceLayer, IdempotencyTable, LedgerTable

HERE = Path(__file__).resolve().parent

app = App()
stack = Stack(app, "TableStreamApp")
orders = dynamodb.Table(
    stack,
    "Orders",
    partition_key=dynamodb.Attribute(name="orderId", type=dynamodb.AttributeType.STRING),
    billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
    stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    removal_policy=RemovalPolicy.DESTROY,
)
effects = LedgerTable(stack, "Effects", removal_policy=RemovalPolicy.DESTROY)
DynamoDbStreamConsumer(
    stack,
    "OrderChanges",
    source_table=orders,
    code=lambda_.Code.from_asset(str(HERE / "lambdas" / "orders")),
    table=IdempotencyTable(stack, "Records", removal_policy=RemovalPolicy.DESTROY),
    layer=ExactlyOnceLayer(stack, "Layer", removal_policy=RemovalPolicy.DESTROY),
    ledger=effects,
    removal_policy=RemovalPolicy.DESTROY,
)
CfnOutput(stack, "OrdersTableName", value=orders.table_name)
CfnOutput(stack, "EffectsTableName", value=effects.table_name)
app.synth()
