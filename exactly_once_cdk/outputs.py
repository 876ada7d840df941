"""The stack output names the constructs write and the CLI reads (plain Python, no CDK import).

A consumer's outputs are `<Id><suffix>` (`OrdersQueueUrl`), and so are an HTTP API's
(`PaymentsApiUrl`), a topic's (`SalesTopicArn`) and an SNS subscriber's
(`SalesCounterDeadLetterQueueUrl`); the tables' names are fixed, so one table of each kind per
stack carries them.
"""

from __future__ import annotations

QUEUE_URL = "QueueUrl"
QUEUE_ARN = "QueueArn"
DEAD_LETTER_QUEUE_URL = "DeadLetterQueueUrl"
DEAD_LETTER_QUEUE_ARN = "DeadLetterQueueArn"
FUNCTION_NAME = "FunctionName"  # consumers, HTTP APIs and SNS subscribers alike
API_URL = "Url"  # an HTTP API's invoke URL (ends in "/")
API_ID = "ApiId"
TOPIC_ARN = "TopicArn"
# A stream consumer's (its DLQ's URL is in its function's environment: a `<Id>DeadLetterQueueUrl`
# beside a `<Id>FunctionName` and no queue is how the CLI knows an SNS subscriber).
ON_FAILURE_QUEUE_ARN = "OnFailureQueueArn"
STREAM_NAME = "StreamName"
STREAM_ARN = "StreamArn"
IDEMPOTENCY_TABLE = "IdempotencyTableName"
# The PostgreSQL store's libpq DSN (RDS Proxy, no password: IAM auth), instead of the table's name.
IDEMPOTENCY_DSN = "IdempotencyDsn"
LEDGER_TABLE = "LedgerTableName"
# Only on stacks deployed into the local emulator: DynamoDB Local's endpoint, apart from moto's.
LOCAL_DYNAMODB_ENDPOINT = "LocalDynamoDbEndpoint"
LOCAL_DYNAMODB_CONTEXT = "localDynamoDbEndpoint"  # the CDK context key that asks for it

# The CloudFormation metadata key each construct writes on what it deploys, so that a reader of
# the template (`exactly_once_ops.app_template`, for the local emulator and `eonce`) knows the
# entry points by their construct ids, as the outputs do: {"kind": one of the kinds below,
# "id": "<Id>"} on an entry point's function and on a topic. What a template alone cannot say
# is added where it is left out: an API made without API Gateway (`create_api=False`) lists its
# "routes" ("POST /path"), a subscriber made without its subscription (`subscribe=False`) names
# its "topic" (the ARN). A stream consumer's also names its "source" (one of STREAM_SOURCES).
ENTRY_POINT_METADATA = "ExactlyOnce"
KIND_CONSUMER = "consumer"
KIND_API = "api"
KIND_SUBSCRIBER = "subscriber"
KIND_STREAM = "stream"
KIND_TOPIC = "topic"
STREAM_SOURCES = ("kinesis", "dynamodb", "kafka")
