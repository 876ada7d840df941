"""CDK constructs for exactly-once consumers: the table (or the PostgreSQL database), the layer,
the consumer, the HTTP API, the SNS topic and its direct subscriber, the stream consumers
(Kinesis, DynamoDB Streams, Kafka), the monitor.

Import from here in your own CDK app (`pip install 'exactly-once-sqs[cdk]'`); each construct has
secure defaults and takes keywords to override them. The names load on first use, so the
plain-Python modules (`consumer_rules`, `layer_build`) import without loading CDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from exactly_once_cdk.alarms import AlarmTopic as AlarmTopic
    from exactly_once_cdk.completer import AbandonedWorkCompleter as AbandonedWorkCompleter
    from exactly_once_cdk.consumer import IdempotentConsumer as IdempotentConsumer
    from exactly_once_cdk.dashboard import ExactlyOnceDashboard as ExactlyOnceDashboard
    from exactly_once_cdk.dynamodb_stream import DynamoDbStreamConsumer as DynamoDbStreamConsumer
    from exactly_once_cdk.functions import FunctionOptions as FunctionOptions
    from exactly_once_cdk.http_api import IdempotentHttpApi as IdempotentHttpApi
    from exactly_once_cdk.kafka_source import KafkaConsumer as KafkaConsumer
    from exactly_once_cdk.kafka_source import MskCluster as MskCluster
    from exactly_once_cdk.kafka_source import SelfManagedKafka as SelfManagedKafka
    from exactly_once_cdk.kinesis_stream import KinesisStreamConsumer as KinesisStreamConsumer
    from exactly_once_cdk.layer import ExactlyOnceLayer as ExactlyOnceLayer
    from exactly_once_cdk.lock_monitor import StuckLockMonitor as StuckLockMonitor
    from exactly_once_cdk.postgres_store import IdempotencyDatabase as IdempotencyDatabase
    from exactly_once_cdk.runtime_target import RuntimeTarget as RuntimeTarget
    from exactly_once_cdk.stream_consumer import StreamConsumerBase as StreamConsumerBase
    from exactly_once_cdk.stream_consumer import StreamConsumerOptions as StreamConsumerOptions
    from exactly_once_cdk.subscriber import IdempotentSubscriber as IdempotentSubscriber
    from exactly_once_cdk.tables import IdempotencyTable as IdempotencyTable
    from exactly_once_cdk.tables import LedgerTable as LedgerTable
    from exactly_once_cdk.topic import IdempotentTopic as IdempotentTopic

_HOMES = {
    "AbandonedWorkCompleter": "completer",
    "AlarmTopic": "alarms",
    "DynamoDbStreamConsumer": "dynamodb_stream",
    "ExactlyOnceDashboard": "dashboard",
    "ExactlyOnceLayer": "layer",
    "FunctionOptions": "functions",
    "IdempotencyDatabase": "postgres_store",
    "IdempotencyTable": "tables",
    "IdempotentConsumer": "consumer",
    "IdempotentHttpApi": "http_api",
    "IdempotentSubscriber": "subscriber",
    "IdempotentTopic": "topic",
    "KafkaConsumer": "kafka_source",
    "KinesisStreamConsumer": "kinesis_stream",
    "LedgerTable": "tables",
    "MskCluster": "kafka_source",
    "RuntimeTarget": "runtime_target",
    "SelfManagedKafka": "kafka_source",
    "StreamConsumerBase": "stream_consumer",
    "StreamConsumerOptions": "stream_consumer",
    "StuckLockMonitor": "lock_monitor",
}
__all__ = [
    "AbandonedWorkCompleter",
    "AlarmTopic",
    "DynamoDbStreamConsumer",
    "ExactlyOnceDashboard",
    "ExactlyOnceLayer",
    "FunctionOptions",
    "IdempotencyDatabase",
    "IdempotencyTable",
    "IdempotentConsumer",
    "IdempotentHttpApi",
    "IdempotentSubscriber",
    "IdempotentTopic",
    "KafkaConsumer",
    "KinesisStreamConsumer",
    "LedgerTable",
    "MskCluster",
    "RuntimeTarget",
    "SelfManagedKafka",
    "StreamConsumerBase",
    "StreamConsumerOptions",
    "StuckLockMonitor",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{_HOMES[name]}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("aws_cdk", "constructs"):
            raise
        raise ModuleNotFoundError(
            f"{name} needs {exc.name}, which is not installed: pip install 'exactly-once-sqs[cdk]'",
            name=exc.name,
        ) from None
    return getattr(module, name)
