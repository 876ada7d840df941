"""Where the operator CLI sends: AWS clients for an endpoint/profile/region, and queue URLs.

Queues are named directly by URL or through the CDK stack's outputs, so the same command works
against the local stack and a real account without copying URLs around. A consumer is any
`<Name>QueueUrl` output (what `IdempotentConsumer` writes), matched without regard to case, so
the CLI knows the consumers of any stack built from the constructs, not only this repo's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from exactly_once_cdk.outputs import DEAD_LETTER_QUEUE_URL, QUEUE_URL

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_sqs import SQSClient

DEFAULT_STACK = "ExactlyOnceSqs"
DEFAULT_REGION = "us-east-1"


class TargetError(Exception):
    """A user-facing problem with where to send; the message is printed as one line."""


def client_config(endpoint_url: str | None) -> Config:
    """Standard retry mode everywhere; an explicit endpoint (a local emulator) also fails fast.

    A local endpoint that is down should say so in a second, not after a minute of retries.
    """
    if endpoint_url:
        return Config(
            retries={"mode": "standard", "max_attempts": 2},
            connect_timeout=2,
            read_timeout=30,
        )
    return Config(retries={"mode": "standard"})


@dataclass(frozen=True)
class AwsTarget:
    """The account/emulator the CLI talks to (the global --endpoint-url/--profile/--region)."""

    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None

    def session(self) -> boto3.Session:
        """A session whose region falls back to the profile's, then to us-east-1."""
        session = boto3.Session(profile_name=self.profile, region_name=self.region)
        if session.region_name is None:
            session = boto3.Session(profile_name=self.profile, region_name=DEFAULT_REGION)
        return session

    def sqs(self) -> SQSClient:
        return self.session().client(
            "sqs", endpoint_url=self.endpoint_url, config=client_config(self.endpoint_url)
        )

    def client(self, service: str) -> Any:
        """A client for any service; `AWS_ENDPOINT_URL_<SERVICE>` beats --endpoint-url.

        The local stack keeps DynamoDB in DynamoDB Local, apart from the other services.
        """
        endpoint = os.environ.get(f"AWS_ENDPOINT_URL_{service.upper()}") or self.endpoint_url
        return self.session().client(  # type: ignore[call-overload]
            service, endpoint_url=endpoint, config=client_config(endpoint)
        )

    def cloudformation(self) -> CloudFormationClient:
        return self.session().client(
            "cloudformation",
            endpoint_url=self.endpoint_url,
            config=client_config(self.endpoint_url),
        )


def consumers_in(outputs: dict[str, str]) -> list[str]:
    """The consumer names a stack's outputs declare: `Orders` for `OrdersQueueUrl`."""
    return sorted(
        key[: -len(QUEUE_URL)]
        for key in outputs
        if key.endswith(QUEUE_URL) and not key.endswith(DEAD_LETTER_QUEUE_URL)
    )


def consumer_output(outputs: dict[str, str], consumer: str, suffix: str, stack: str) -> str:
    """The output `<Consumer><suffix>`, with the consumer named in any case (orders, Orders)."""
    wanted = f"{consumer}{suffix}".lower()
    for key, value in outputs.items():
        if key.lower() == wanted:
            return value
    known = ", ".join(name.lower() for name in consumers_in(outputs)) or "none"
    raise TargetError(
        f"stack {stack!r} has no consumer {consumer!r} "
        f"(no output {consumer[:1].upper()}{consumer[1:]}{suffix}); its consumers: {known}"
    )


def stack_outputs(cloudformation: CloudFormationClient, stack: str) -> dict[str, str]:
    """All outputs of a deployed stack, by key."""
    stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    if not stacks:
        raise TargetError(f"stack {stack!r} not found")
    return {
        out["OutputKey"]: out["OutputValue"]
        for out in stacks[0].get("Outputs", [])
        if "OutputKey" in out and "OutputValue" in out
    }


def resolve_queue_url(
    target: AwsTarget,
    *,
    queue_url: str | None,
    consumer: str | None,
    stack: str = DEFAULT_STACK,
    dead_letter: bool = False,
) -> str:
    """An explicit URL wins; otherwise look the consumer's queue up in the stack's outputs."""
    if queue_url:
        return queue_url
    if not consumer:
        which = "--dlq-url" if dead_letter else "--queue-url"
        raise TargetError(
            f"name the queue: {which} URL, or --consumer NAME (see `eonce consumers`)"
        )
    outputs = stack_outputs(target.cloudformation(), stack)
    return consumer_output(
        outputs, consumer, DEAD_LETTER_QUEUE_URL if dead_letter else QUEUE_URL, stack
    )


def is_fifo(queue_url: str) -> bool:
    """FIFO queue names must end in `.fifo`, so the URL alone tells."""
    return queue_url.rstrip("/").endswith(".fifo")


def queue_arn(sqs: SQSClient, queue_url: str) -> str:
    """The ARN that the message-move APIs want instead of a URL."""
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    return attrs["Attributes"]["QueueArn"]


def content_based_dedup(sqs: SQSClient, queue_url: str) -> bool:
    """Whether a FIFO queue derives deduplication ids itself (so senders may omit them).

    Asks for "All" because standard queues have no such attribute to ask for by name.
    """
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])
    return attrs.get("Attributes", {}).get("ContentBasedDeduplication") == "true"


def replay_destination(sqs: SQSClient, dlq_url: str) -> str:
    """The one queue whose redrive policy points at this DLQ (when no destination was given)."""
    sources = sqs.list_dead_letter_source_queues(QueueUrl=dlq_url).get("queueUrls", [])
    if len(sources) != 1:
        found = ", ".join(sources) if sources else "none"
        raise TargetError(
            f"cannot tell where to replay: source queues of this DLQ: {found}; pass --queue-url"
        )
    return sources[0]
