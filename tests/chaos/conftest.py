"""SQS on a moto server for the chaos tests: the consumer tests' fixtures, reused."""

from tests.consumer.conftest import moto_endpoint, sqs

__all__ = ["moto_endpoint", "sqs"]
