"""The deployed app's stream consumers, found as the SQS consumers are: from the cloud assembly
(which function reads which stream, and the function's staged code) and from the deployment
(the function's configuration and the event source mapping's settings, read back from moto).

A stream consumer is an `AWS::Lambda::EventSourceMapping` whose EventSourceArn is a Kinesis
stream of the stack (`Fn::GetAtt [<stream>, Arn]`). Its id is the construct's (the metadata's
"id" when a construct wrote one, else the mapping's parent in its CDK path:
"Stack/OrderStream/EventSourceMapping/Resource" -> "OrderStream", or of its logical id
"OrderStreamEventSourceMapping869864E2" without path metadata), which is also the prefix of
its outputs. Locally the mapping is disabled (moto would try to run the function in Docker);
`local_aws.stream_poller` reads the shards in its place with the mapping's own settings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from exactly_once_cdk.outputs import ENTRY_POINT_METADATA, KIND_CONSUMER
from exactly_once_ops.app_model import AppModelError, DeployedApp
from exactly_once_ops.app_template import _function, reference
from exactly_once_ops.handlers import deployed_environment
from local_aws.cloud_assembly import _asset_paths, _stack_artifacts
from local_aws.stream_poller import MappingSettings

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_sqs import SQSClient

    from exactly_once_ops.app_model import Function

KINESIS_STREAM = "AWS::Kinesis::Stream"
DYNAMODB_TABLE = "AWS::DynamoDB::Table"
KINESIS, DYNAMODB = "kinesis", "dynamodb"
SOURCES = {KINESIS_STREAM: KINESIS, DYNAMODB_TABLE: DYNAMODB}
REPORT_BATCH_ITEM_FAILURES = "ReportBatchItemFailures"


@dataclass(frozen=True)
class StreamConsumerSpec:
    """A stream consumer as the template declares it (logical ids, code folder)."""

    id: str
    function: Function
    stream: str  # logical id of the AWS::Kinesis::Stream (or of the AWS::DynamoDB::Table)
    mapping: str  # logical id of the AWS::Lambda::EventSourceMapping
    source: str = KINESIS  # or DYNAMODB: the mapping reads the table's stream


def stream_consumers(
    assembly_dir: Path, stack_name: str, *, tables: bool = False
) -> list[StreamConsumerSpec]:
    """The stack's Kinesis stream consumers, read from its template in the cloud assembly;
    with `tables`, also the consumers of its tables' streams (`Fn::GetAtt [<table>,
    StreamArn]`)."""
    found = [
        artifact
        for artifact in _stack_artifacts(assembly_dir.resolve())
        if stack_name in (artifact.name, artifact.artifact_id)
    ]
    if len(found) != 1:
        raise AppModelError(f"{assembly_dir} has {len(found)} stacks named {stack_name!r}")
    (stack,) = found
    template = json.loads(
        (stack.directory / stack.artifact["properties"]["templateFile"]).read_text()
    )
    resources: Mapping[str, Mapping[str, Any]] = template.get("Resources") or {}
    assets = _asset_paths(stack.directory, stack.artifacts, stack.artifact)
    specs = []
    for mapping_id, resource in resources.items():
        if resource.get("Type") != "AWS::Lambda::EventSourceMapping":
            continue
        props = resource.get("Properties") or {}
        source = reference(props.get("EventSourceArn"))
        kind = SOURCES.get(str((resources.get(source or "") or {}).get("Type")))
        if source is None or kind is None or (kind == DYNAMODB and not tables):
            continue
        function_id = reference(props.get("FunctionName"))
        function = resources.get(function_id or "")
        if function_id is None or function is None:
            raise AppModelError(f"{mapping_id}: its function is not a resource of the stack")
        consumer_id = _consumer_id(mapping_id, resource, function)
        marked = {"kind": KIND_CONSUMER, "id": consumer_id}
        specs.append(
            StreamConsumerSpec(
                id=consumer_id,
                function=_function(
                    function_id, marked, function, stack.directory, assets, resources
                ),
                stream=source,
                mapping=mapping_id,
                source=kind,
            )
        )
    return specs


def _consumer_id(mapping_id: str, mapping: Mapping[str, Any], function: Mapping[str, Any]) -> str:
    marked = (function.get("Metadata") or {}).get(ENTRY_POINT_METADATA)
    if isinstance(marked, Mapping) and marked.get("id"):
        return str(marked["id"])
    path = str((mapping.get("Metadata") or {}).get("aws:cdk:path") or "").split("/")
    if len(path) >= 3 and path[-2] == "EventSourceMapping":
        return path[-3]
    # Synthesized without path metadata: the logical id is the path's ids and a hash.
    found = re.fullmatch(r"(.+)EventSourceMapping[0-9A-F]{8}", mapping_id)
    return found.group(1) if found else mapping_id


@dataclass(frozen=True)
class StreamBinding:
    """Everything a stream worker needs to run one deployed function against its stream."""

    function_name: str
    source_dir: str
    handler: str
    environment: dict[str, str]
    timeout_s: int
    consumer: str  # the construct id: OrderStream
    stream_name: str  # a DynamoDB source's: the table's name
    stream_arn: str
    source: str = KINESIS  # or DYNAMODB: the worker reads the table's stream in DynamoDB Local
    batch_size: int = 100
    batching_window_s: int = 0
    bisect_on_error: bool = False
    max_retry_attempts: int = -1
    max_record_age_s: int = -1
    report_batch_item_failures: bool = False
    on_failure_queue_url: str | None = None

    @property
    def label(self) -> str:
        return self.consumer

    @property
    def scope(self) -> str:
        return self.environment.get("CONSUMER_SCOPE") or self.consumer.lower()

    @property
    def dead_letter_queue_url(self) -> str | None:
        return self.environment.get("DEAD_LETTER_QUEUE_URL")

    def settings(self, region: str) -> MappingSettings:
        return MappingSettings(
            function_name=self.function_name,
            batch_size=self.batch_size,
            batching_window_s=self.batching_window_s,
            bisect_on_error=self.bisect_on_error,
            max_retry_attempts=self.max_retry_attempts,
            max_record_age_s=self.max_record_age_s,
            report_batch_item_failures=self.report_batch_item_failures,
            timeout_s=self.timeout_s,
            region=region,
        )


def describe_stream_bindings(bindings: list[StreamBinding]) -> str:
    """ "OrderStream: batch 100, bisect on, 10 retries, timeout 3s"."""
    return "; ".join(
        f"{b.label}: batch {b.batch_size}, bisect {'on' if b.bisect_on_error else 'off'}, "
        f"{'unlimited' if b.max_retry_attempts < 0 else b.max_retry_attempts} retries, "
        f"timeout {b.timeout_s}s"
        for b in bindings
    )


def _queue_url(sqs: SQSClient, arn: str) -> str:
    return sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"]


def discover_stream_bindings(
    lambda_client: LambdaClient, sqs: SQSClient, app: DeployedApp, specs: list[StreamConsumerSpec]
) -> list[StreamBinding]:
    """Each stream consumer's deployed function and mapping: environment, timeout, batching,
    retries, bisect, record age and on-failure queue, as the deployment has them."""
    bindings = []
    for spec in specs:
        name = app.physical_id(spec.function.logical_id)
        config = lambda_client.get_function_configuration(FunctionName=name)
        mappings = lambda_client.list_event_source_mappings(FunctionName=name)[
            "EventSourceMappings"
        ]
        if len(mappings) != 1:
            raise RuntimeError(f"{name} has {len(mappings)} event source mappings, expected 1")
        mapping: Mapping[str, Any] = mappings[0]
        destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get(
            "Destination"
        )
        stream_arn = str(mapping["EventSourceArn"])
        bindings.append(
            StreamBinding(
                function_name=name,
                source_dir=str(spec.function.code_folder()),
                handler=config.get("Handler", spec.function.handler),
                environment=deployed_environment(config, spec.function.layer_dirs),
                timeout_s=int(config.get("Timeout", 30)),
                consumer=spec.id,
                stream_name=app.physical_id(spec.stream),
                stream_arn=stream_arn,
                source=spec.source,
                batch_size=int(mapping.get("BatchSize") or 100),
                batching_window_s=int(mapping.get("MaximumBatchingWindowInSeconds") or 0),
                bisect_on_error=bool(mapping.get("BisectBatchOnFunctionError")),
                max_retry_attempts=_or_infinite(mapping.get("MaximumRetryAttempts")),
                max_record_age_s=_or_infinite(mapping.get("MaximumRecordAgeInSeconds")),
                report_batch_item_failures=REPORT_BATCH_ITEM_FAILURES
                in (mapping.get("FunctionResponseTypes") or []),
                on_failure_queue_url=None if not destination else _queue_url(sqs, destination),
            )
        )
    return bindings


def _or_infinite(value: Any) -> int:
    return -1 if value is None else int(value)
