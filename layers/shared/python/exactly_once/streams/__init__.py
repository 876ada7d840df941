"""Stream consumers: Kinesis, DynamoDB Streams and Kafka on the queue consumer's state machine."""

from exactly_once.streams.consumer import StreamConsumer, stream_consumer

__all__ = ["StreamConsumer", "stream_consumer"]
