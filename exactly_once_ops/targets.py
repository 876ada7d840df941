"""Where the operator CLI sends: AWS clients for an endpoint/profile/region, and queue URLs.

One rule each for the region (`AwsTarget.region_name`) and for a service's endpoint
(`AwsTarget.endpoint`), so every command, and a handler run by `invoke`, talks to the same place.

Queues are named directly by URL or through the CDK stack's outputs, so the same command works
against the local stack and a real account without copying URLs around. A consumer is any
`<Name>QueueUrl` output (what `IdempotentConsumer` writes), matched without regard to case, so
the CLI knows the consumers of any stack built from the constructs, not only this repo's.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
import botocore.loaders
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectTimeoutError, EndpointConnectionError
from botocore.exceptions import ConnectionError as BotocoreConnectionError

from exactly_once_cdk.outputs import (
    DEAD_LETTER_QUEUE_URL,
    FUNCTION_NAME,
    LOCAL_DYNAMODB_ENDPOINT,
    ON_FAILURE_QUEUE_ARN,
    QUEUE_URL,
    TOPIC_ARN,
)

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_sqs import SQSClient

DEFAULT_STACK = "ExactlyOnceSqs"
DEFAULT_REGION = "us-east-1"


class StackNotFound(Exception):
    """No such stack where the CLI looked; the message names the region and the endpoint."""


class TargetError(Exception):
    """A user-facing problem with where to send; the message is printed as one line."""


class UnreachableEndpoint(BotocoreConnectionError):
    """A connection failure of a client made here, naming the setting its endpoint came from."""

    fmt = "{error} ({hint})"


"""Output of a stack deployed into the local emulator: its tables live in DynamoDB Local, not
behind the emulator's own endpoint (whose empty copies would give silent wrong answers)."""


@dataclass(frozen=True)
class Endpoint:
    """A service's endpoint and the setting it came from (None: AWS's own endpoint)."""

    url: str | None
    source: str | None = None

    def __str__(self) -> str:
        return f"{self.url} (from {self.source})" if self.url else "AWS"

    def hint(self, service: str) -> str:
        """What to check when nothing answers there."""
        if self.url is None:
            return "is the network up? check --region / AWS_REGION"
        hint = f"is the endpoint up? check {self.source}"
        variable = service_endpoint_variable(service)
        if self.source != variable:
            hint += f", or set {variable}"
        return hint


def service_endpoint_variable(service: str) -> str:
    """botocore's per-service endpoint variable: AWS_ENDPOINT_URL_DYNAMODB."""
    return f"AWS_ENDPOINT_URL_{service.upper().replace('-', '_')}"


def client_config(endpoint_url: str | None) -> Config:
    """Standard retry mode everywhere; an explicit endpoint (a local emulator) also fails fast.

    A local endpoint that is down should say so in a second, not after a minute of retries.
    """
    if endpoint_url:
        return Config(
            retries={"mode": "standard", "total_max_attempts": 2},
            connect_timeout=2,
            read_timeout=30,
        )
    return Config(retries={"mode": "standard"})


def _name_endpoint_on_failure(client: Any, hint: str) -> None:
    """Turn the client's connection failures (after its retries) into `UnreachableEndpoint`.

    Raised from botocore's after-call-error event, so every call of every command is covered.
    """

    def reraise(exception: BaseException, **_: Any) -> None:
        if isinstance(exception, (EndpointConnectionError, ConnectTimeoutError)):
            raise UnreachableEndpoint(error=exception, hint=hint) from exception

    client.meta.events.register("after-call-error", reraise)


@dataclass(frozen=True)
class LocalStackTarget:
    """The stack `eonce up` serves, as a target: its DynamoDB Local and its test credentials
    (exactly_once_ops.local_target says when the CLI uses it)."""

    pid: int
    stack: str
    dynamodb_endpoint_url: str
    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    @property
    def source(self) -> str:
        """Where its endpoints came from, for an unreachable-endpoint hint."""
        return f"the local stack (pid {self.pid}; `eonce status`)"

    def credentials(self) -> dict[str, str]:
        """As the AWS variables name them."""
        found = {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
        }
        if self.session_token:
            found["AWS_SESSION_TOKEN"] = self.session_token
        return found


@dataclass(frozen=True)
class AwsTarget:
    """The account/emulator the CLI talks to (the global --endpoint-url/--profile/--region), or
    the local stack `eonce up` serves when none was named (`local`)."""

    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None
    local: LocalStackTarget | None = None

    @cached_property
    def region_name(self) -> str:
        """--region, else AWS_REGION, else AWS_DEFAULT_REGION, else the profile's, else us-east-1.

        botocore reads only AWS_DEFAULT_REGION and the profile, so the rule is applied here once
        and every client (and an invoked handler's, through the environment) gets its result.
        """
        chosen = self.region or os.environ.get("AWS_REGION")
        if chosen:
            return chosen
        return boto3.Session(profile_name=self.profile).region_name or DEFAULT_REGION

    def session(self) -> boto3.Session:
        if self.local is not None:
            return boto3.Session(
                aws_access_key_id=self.local.access_key_id,
                aws_secret_access_key=self.local.secret_access_key,
                aws_session_token=self.local.session_token,
                region_name=self.region_name,
            )
        return boto3.Session(profile_name=self.profile, region_name=self.region_name)

    def endpoint(self, service: str, outputs: Mapping[str, str] | None = None) -> Endpoint:
        """`AWS_ENDPOINT_URL_<SERVICE>`, else (DynamoDB) the stack's `LocalDynamoDbEndpoint`
        output or the local stack's DynamoDB Local, else --endpoint-url / AWS_ENDPOINT_URL (or
        the local stack's moto), else AWS's own endpoint.
        """
        variable = service_endpoint_variable(service)
        if url := os.environ.get(variable):
            return Endpoint(url, variable)
        if service == "dynamodb" and (url := (outputs or {}).get(LOCAL_DYNAMODB_ENDPOINT)):
            return Endpoint(url, f"the stack output {LOCAL_DYNAMODB_ENDPOINT}")
        if service == "dynamodb" and self.local is not None:
            return Endpoint(self.local.dynamodb_endpoint_url, self.local.source)
        if self.endpoint_url:
            source = self.local.source if self.local else "--endpoint-url / AWS_ENDPOINT_URL"
            return Endpoint(self.endpoint_url, source)
        return Endpoint(None)

    def client(self, service: str, endpoint: Endpoint | None = None) -> Any:
        """A client for any service, at `endpoint` (default: `self.endpoint(service)`)."""
        where = endpoint or self.endpoint(service)
        client = self.session().client(  # type: ignore[call-overload]
            service, endpoint_url=where.url, config=client_config(where.url)
        )
        _name_endpoint_on_failure(client, where.hint(service))
        return client

    def sqs(self) -> SQSClient:
        client: SQSClient = self.client("sqs")
        return client

    def cloudformation(self) -> CloudFormationClient:
        """Its stack outputs name queues at the SQS endpoint in use (`emulator_queue_urls`)."""
        client: CloudFormationClient = self.client("cloudformation")
        sqs = self.endpoint("sqs").url
        if sqs and not is_aws_endpoint(sqs):
            client.meta.events.register(
                "after-call.cloudformation.DescribeStacks", emulator_queue_urls(sqs)
            )
        return client


AWS_QUEUE_URL = re.compile(r"^https://sqs\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?/(\d{12}/[^/]+)$")


def is_aws_endpoint(url: str) -> bool:
    """An endpoint of AWS itself (a regional, FIPS, dual-stack or VPC endpoint, in any
    partition), not an emulator's."""
    host = urlsplit(url).hostname or ""
    return host.endswith(aws_dns_suffixes())


@cache
def aws_dns_suffixes() -> tuple[str, ...]:
    """Every partition's DNS suffixes, as botocore's partitions data names them:
    ".amazonaws.com", ".api.aws" (dual-stack), ".amazonaws.com.cn", ..."""
    partitions = botocore.loaders.create_loader().load_data("partitions")["partitions"]
    found = {".amazonaws.com", ".amazonaws.com.cn"}
    for partition in partitions:
        outputs = partition.get("outputs", {})
        for name in ("dnsSuffix", "dualStackDnsSuffix"):
            if suffix := outputs.get(name):
                found.add(f".{suffix}")
    return tuple(sorted(found))


def emulator_queue_urls(sqs_endpoint: str) -> Callable[..., None]:
    """A DescribeStacks hook: each output that is a queue URL in AWS's form (moto's
    CloudFormation gives `https://sqs.<region>.amazonaws.com/<account>/<name>` for a queue's
    Ref, whatever its endpoint) becomes the URL the emulator's SQS itself answers with
    (`<endpoint>/<account>/<name>`), so what the CLI prints never looks like real AWS."""
    base = sqs_endpoint.rstrip("/")

    def rewrite(parsed: dict[str, Any], **_: Any) -> None:
        for stack in parsed.get("Stacks", []):
            for output in stack.get("Outputs", []):
                found = AWS_QUEUE_URL.match(str(output.get("OutputValue", "")))
                if found:
                    output["OutputValue"] = f"{base}/{found.group(1)}"

    return rewrite


def consumers_in(outputs: Mapping[str, str]) -> list[str]:
    """The consumer names a stack's outputs declare: `Orders` for `OrdersQueueUrl`."""
    return sorted(
        key[: -len(QUEUE_URL)]
        for key in outputs
        if key.endswith(QUEUE_URL) and not key.endswith(DEAD_LETTER_QUEUE_URL)
    )


def subscribers_in(outputs: Mapping[str, str]) -> list[str]:
    """The direct topic subscribers a stack's outputs declare: a function with a DLQ and no
    queue of its own (`SalesCounter` for `SalesCounterFunctionName` and
    `SalesCounterDeadLetterQueueUrl`)."""
    return sorted(
        key[: -len(DEAD_LETTER_QUEUE_URL)]
        for key in outputs
        if key.endswith(DEAD_LETTER_QUEUE_URL)
        and f"{key[: -len(DEAD_LETTER_QUEUE_URL)]}{QUEUE_URL}" not in outputs
        and f"{key[: -len(DEAD_LETTER_QUEUE_URL)]}{FUNCTION_NAME}" in outputs
    )


def stream_consumers_in(outputs: Mapping[str, str]) -> list[str]:
    """The stream consumers a stack's outputs declare: a function with an on-failure queue
    (`OrderStream` for `OrderStreamFunctionName` and `OrderStreamOnFailureQueueArn`)."""
    return sorted(
        key[: -len(ON_FAILURE_QUEUE_ARN)]
        for key in outputs
        if key.endswith(ON_FAILURE_QUEUE_ARN)
        and f"{key[: -len(ON_FAILURE_QUEUE_ARN)]}{FUNCTION_NAME}" in outputs
    )


def no_such_name(
    what: str, name: str, stack: str, known: list[str], *, listed: str | None = None
) -> TargetError:
    """ "no consumer 'ordrs' in stack 'S'; the consumers are: orders, payments (did you mean
    'orders'?)": a misspelt name says so, whatever the command would have done next."""
    names = sorted({found.lower() for found in known})
    close = difflib.get_close_matches(name.lower(), names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TargetError(
        f"no {what} {name!r} in stack {stack!r}; {listed or f'the {what}s are'}: "
        f"{', '.join(names) or 'none'}{hint}"
    )


def consumer_output(outputs: Mapping[str, str], consumer: str, suffix: str, stack: str) -> str:
    """The output `<Consumer><suffix>`, with the consumer named in any case (orders, Orders)."""
    wanted = f"{consumer}{suffix}".lower()
    for key, value in outputs.items():
        if key.lower() == wanted:
            return value
    names = consumers_in(outputs)
    if consumer.lower() not in (name.lower() for name in names):
        raise no_such_name("consumer", consumer, stack, names)
    raise TargetError(
        f"stack {stack!r} has no output {consumer[:1].upper()}{consumer[1:]}{suffix} for its "
        f"consumer {consumer!r}"
    )


def functions_in(outputs: Mapping[str, str]) -> list[str]:
    """Every function a stack's outputs name: consumers, APIs and subscribers alike
    (`PaymentsApi` for `PaymentsApiFunctionName`)."""
    return sorted(key[: -len(FUNCTION_NAME)] for key in outputs if key.endswith(FUNCTION_NAME))


def topics_in(outputs: Mapping[str, str]) -> list[str]:
    """The topic names a stack's outputs declare: `Sales` for `SalesTopicArn`."""
    return sorted(key[: -len(TOPIC_ARN)] for key in outputs if key.endswith(TOPIC_ARN))


def resolve_topic_arn(
    target: AwsTarget, *, topic_arn: str | None, topic: str | None, stack: str = DEFAULT_STACK
) -> str:
    """An explicit ARN wins; otherwise the stack's `<Topic>TopicArn` output (any case)."""
    if topic_arn:
        return topic_arn
    if not topic:
        raise TargetError("name the topic: --topic-arn ARN, or --topic NAME (e.g. sales)")
    outputs = stack_outputs(target.cloudformation(), stack)
    wanted = f"{topic}{TOPIC_ARN}".lower()
    for key, value in outputs.items():
        if key.lower() == wanted:
            return value
    raise no_such_name("topic", topic, stack, topics_in(outputs))


def stack_outputs(cloudformation: CloudFormationClient, stack: str) -> dict[str, str]:
    """All outputs of a deployed stack, by key."""
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as exc:
        if "does not exist" not in str(exc):
            raise
        stacks = []
    if not stacks:
        meta = cloudformation.meta
        raise StackNotFound(
            f"stack {stack!r} does not exist in {meta.region_name} at {meta.endpoint_url} "
            "(check --stack / EONCE_STACK, --region, --endpoint-url, --profile)"
        )
    return {
        out["OutputKey"]: out["OutputValue"]
        for out in stacks[0].get("Outputs", [])
        if "OutputKey" in out and "OutputValue" in out
    }


def stack_table(
    target: AwsTarget, stack: str, output: str, table: str | None = None
) -> tuple[str, Endpoint]:
    """A table named by the stack's `output` (or given), and the DynamoDB endpoint it lives at.

    The stack's outputs also carry the local stack's real DynamoDB endpoint; a table given by
    name skips the stack, so only AWS_ENDPOINT_URL_DYNAMODB or --endpoint-url can move it.
    """
    if table:
        return table, target.endpoint("dynamodb")
    outputs = stack_outputs(target.cloudformation(), stack)
    name = outputs.get(output)
    if not name:
        raise TargetError(f"stack {stack!r} has no {output} output; pass --table")
    return name, target.endpoint("dynamodb", outputs)


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
