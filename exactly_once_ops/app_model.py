"""What a deployed app built with the constructs runs, as values: its entry points (consumers,
APIs, subscribers, stream consumers), their topics and tables, and the physical ids the
deployment gave them.

The model is read from a stack's template (`exactly_once_ops.app_template`), by the local
emulator from the cloud assembly (`local_aws.cloud_assembly`, which also finds each function's
staged code folder) and by the operator's tools from CloudFormation (no code folder there).
Logical ids are the template's; `DeployedApp.bind` adds the physical ids (function names, queue
URLs, topic ARNs) from the deployed stack's resources, which is where the deployment itself
keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exactly_once_cdk.outputs import KIND_API, KIND_CONSUMER, KIND_STREAM, KIND_SUBSCRIBER

# The variable each kind of entry point's function reads its idempotency scope from.
SCOPE_VARIABLES = {
    KIND_CONSUMER: "CONSUMER_SCOPE",
    KIND_API: "API_SCOPE",
    KIND_SUBSCRIBER: "SUBSCRIBER_SCOPE",
    KIND_STREAM: "CONSUMER_SCOPE",
}
LAMBDA_DEFAULT_RETRIES = 2  # asynchronous invocations without an EventInvokeConfig


class AppModelError(ValueError):
    """The assembly or template does not say what the emulator needs to run."""


@dataclass(frozen=True)
class Function:
    """An entry point's function as the template declares it."""

    logical_id: str
    kind: str  # KIND_CONSUMER, KIND_API, KIND_SUBSCRIBER or KIND_STREAM
    handler: str
    # The staged code folder, inside the cloud assembly; None for a template read without its
    # assembly (from CloudFormation), which names no folder.
    source_dir: Path | None
    environment: Mapping[str, str]  # the template's literal values (references left out)
    # The folders of the app's own layers (asset layers in the assembly: `python/lib/<runtime>/
    # site-packages` and `python/`), in the function's order; the emulator (workers, invoke,
    # replay) puts them on the path after this process's packages.
    layer_dirs: tuple[Path, ...] = ()

    @property
    def scope(self) -> str | None:
        """The idempotency scope the construct gave the function (None if not literal)."""
        return self.environment.get(SCOPE_VARIABLES[self.kind])

    def code_folder(self) -> Path:
        """The folder whose code the function runs; only a template read with its cloud
        assembly has one."""
        if self.source_dir is None:
            raise AppModelError(
                f"{self.logical_id}: no code folder (the template was read without its cloud "
                "assembly)"
            )
        return self.source_dir


@dataclass(frozen=True)
class Consumer:
    id: str  # construct id and output prefix ("Orders")
    function: Function
    queue: str  # logical id of the queue its event source mapping reads


@dataclass(frozen=True)
class Api:
    id: str
    function: Function
    routes: tuple[tuple[str, str], ...]  # (method, path): ("POST", "/payments")


@dataclass(frozen=True)
class Subscriber:
    id: str
    function: Function
    topic: str  # logical id of the topic it is subscribed to
    retry_attempts: int  # Lambda's asynchronous retries before the on-failure destination
    failure_destination: str | None  # logical id of the on-failure queue, if the template has one


@dataclass(frozen=True)
class StreamConsumer:
    """A Kinesis, DynamoDB Streams or Kafka consumer (`KinesisStreamConsumer`,
    `DynamoDbStreamConsumer`, `KafkaConsumer`)."""

    id: str
    function: Function
    source: str  # "kinesis", "dynamodb" or "kafka" (exactly_once_cdk.outputs.STREAM_SOURCES)
    # Logical id of the stream (or of the table whose stream it reads); None when the mapping
    # reads a source outside the stack (a Kafka cluster, a stream made elsewhere).
    stream: str | None


@dataclass(frozen=True)
class Topic:
    id: str  # construct id ("Sales"), or the logical id of a topic no construct marked
    logical_id: str
    queues: tuple[str, ...]  # ids of the consumers whose queues it fans out to
    subscribers: tuple[str, ...]  # ids of its direct Lambda subscribers


@dataclass(frozen=True)
class DeployedApp:
    """One stack's entry points; `physical_ids` (logical id -> physical id) once bound."""

    stack_name: str
    assembly_dir: Path | None = None  # the (nested) cloud assembly it was read from, if any
    consumers: tuple[Consumer, ...] = ()
    apis: tuple[Api, ...] = ()
    subscribers: tuple[Subscriber, ...] = ()
    topics: tuple[Topic, ...] = ()
    tables: tuple[str, ...] = ()  # logical ids of every DynamoDB table, the constructs' or not
    physical_ids: Mapping[str, str] = field(default_factory=dict)
    stream_consumers: tuple[StreamConsumer, ...] = ()

    def topic(self, topic_id: str) -> Topic:
        for topic in self.topics:
            if topic.id == topic_id:
                return topic
        known = [t.id for t in self.topics]
        raise KeyError(f"the stack {self.stack_name} has no topic {topic_id!r}; known: {known}")

    def topic_of(self, subscriber: Subscriber) -> Topic:
        (topic,) = [t for t in self.topics if t.logical_id == subscriber.topic]
        return topic

    def physical_id(self, logical_id: str) -> str:
        """The deployed resource's physical id (a function's name, a queue's URL, a topic's ARN)."""
        found = self.physical_ids.get(logical_id)
        if not found:
            raise AppModelError(
                f"{logical_id} has no physical id in the stack {self.stack_name} "
                f"({'not deployed' if self.physical_ids else 'the model is not bound'})"
            )
        return found

    def bind(self, cloudformation: Any) -> DeployedApp:
        """This model with the deployed stack's physical ids, read from CloudFormation."""
        return replace(self, physical_ids=physical_resource_ids(cloudformation, self.stack_name))


def physical_resource_ids(cloudformation: Any, stack_name: str) -> dict[str, str]:
    """Logical id -> physical id of every resource the stack created (skipped ones left out)."""
    found: dict[str, str] = {}
    paginator = cloudformation.get_paginator("list_stack_resources")
    for page in paginator.paginate(StackName=stack_name):
        for resource in page.get("StackResourceSummaries", []):
            logical = resource.get("LogicalResourceId")
            physical = resource.get("PhysicalResourceId")
            if logical and physical:
                found[str(logical)] = str(physical)
    return found
