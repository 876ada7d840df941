"""What a deployed CDK app runs, read from its cloud assembly and its stack, as SAM reads a
template: the emulator's only source of what to run.

The pure half reads the assembly (`read_assembly`): manifest.json names the stack's template,
and in it every function that an `exactly_once_cdk` construct marked with its metadata
(`ENTRY_POINT_METADATA`: the kind and the construct id, which are also the outputs' prefixes)
is an entry point. Its handler and plain environment are the template's; its code is the
staged asset folder (`aws:asset:path`, else the asset manifest's entry for its S3 key), inside
the assembly, so the assembly must outlive whoever runs the code. The wiring is the template's
own resources: an event source mapping ties a consumer to its queue, a Lambda subscription (or
the metadata's "topic" when the construct left it out) a subscriber to its topic, SQS
subscriptions (resources, or the topic's inline `Subscription` entries) a topic to the queues
it fans out to, API Gateway v2 routes and integrations (or the metadata's "routes") an API to
its paths, and an `AWS::Lambda::EventInvokeConfig` a subscriber to its retries and on-failure
queue. Every `AWS::DynamoDB::Table` is listed too (the local stack mirrors them all into
DynamoDB Local, where the functions' calls go). A stack inside a `Stage` is read from the
nested assembly its stage made. Construct ids name the entry points, so two with one id (in
different scopes) are refused.

The bound half (`DeployedApp.bind`) adds the physical ids of the deployed stack's resources
(function names, queue URLs, topic ARNs) from CloudFormation, which is where the deployment
itself keeps them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from exactly_once_cdk.outputs import (
    ENTRY_POINT_METADATA,
    KIND_API,
    KIND_CONSUMER,
    KIND_SUBSCRIBER,
    KIND_TOPIC,
)

# The variable each kind of entry point's function reads its idempotency scope from.
SCOPE_VARIABLES = {
    KIND_CONSUMER: "CONSUMER_SCOPE",
    KIND_API: "API_SCOPE",
    KIND_SUBSCRIBER: "SUBSCRIBER_SCOPE",
}
LAMBDA_DEFAULT_RETRIES = 2  # asynchronous invocations without an EventInvokeConfig
STACK_ARTIFACT = "aws:cloudformation:stack"
ASSET_MANIFEST_ARTIFACT = "cdk:asset-manifest"
NESTED_ASSEMBLY_ARTIFACT = "cdk:cloud-assembly"  # a Stage's own assembly, in a subfolder

Resources = Mapping[str, Mapping[str, Any]]


class AppModelError(ValueError):
    """The assembly or template does not say what the emulator needs to run."""


@dataclass(frozen=True)
class Function:
    """An entry point's function as the template declares it."""

    logical_id: str
    kind: str  # KIND_CONSUMER, KIND_API or KIND_SUBSCRIBER
    handler: str
    source_dir: Path  # the staged code folder, inside the assembly
    environment: Mapping[str, str]  # the template's literal values (references left out)

    @property
    def scope(self) -> str | None:
        """The idempotency scope the construct gave the function (None if not literal)."""
        return self.environment.get(SCOPE_VARIABLES[self.kind])


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
class Topic:
    id: str  # construct id ("Sales"), or the logical id of a topic no construct marked
    logical_id: str
    queues: tuple[str, ...]  # ids of the consumers whose queues it fans out to
    subscribers: tuple[str, ...]  # ids of its direct Lambda subscribers


@dataclass(frozen=True)
class DeployedApp:
    """One stack's entry points; `physical_ids` (logical id -> physical id) once bound."""

    stack_name: str
    assembly_dir: Path
    consumers: tuple[Consumer, ...] = ()
    apis: tuple[Api, ...] = ()
    subscribers: tuple[Subscriber, ...] = ()
    topics: tuple[Topic, ...] = ()
    tables: tuple[str, ...] = ()  # logical ids of every DynamoDB table, the constructs' or not
    physical_ids: Mapping[str, str] = field(default_factory=dict)

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


# --- the pure half: the assembly and its template -------------------------------------------


def read_assembly(assembly_dir: Path, stack_name: str | None = None) -> DeployedApp:
    """The app's model from a cloud assembly; `stack_name` picks a stack (by its CloudFormation
    name, artifact id or construct path, "Stage/Stack") when the assembly has more than one.
    Stacks inside a `Stage` are in nested assemblies (`assembly-<Stage>/`), read as well."""
    assembly_dir = assembly_dir.resolve()
    stacks = list(_stack_artifacts(assembly_dir))
    chosen = [
        found
        for found in stacks
        if stack_name is None
        or stack_name in (found.artifact_id, found.name, found.artifact.get("displayName"))
    ]
    if len(chosen) != 1:
        wanted = "one stack" if stack_name is None else f"the stack {stack_name!r}"
        raise AppModelError(
            f"{assembly_dir} has {len(chosen)} matches for {wanted}; "
            f"stacks: {sorted(found.name for found in stacks)}"
        )
    (found,) = chosen
    template = json.loads(
        (found.directory / found.artifact["properties"]["templateFile"]).read_text()
    )
    return read_template(
        template,
        stack_name=found.name,
        assembly_dir=found.directory,
        assets=_asset_paths(found.directory, found.artifacts, found.artifact),
    )


@dataclass(frozen=True)
class _StackArtifact:
    directory: Path  # the (nested) assembly whose manifest lists it: its paths are relative here
    artifacts: Mapping[str, Any]  # that manifest's artifacts (its asset manifests among them)
    artifact_id: str
    artifact: Mapping[str, Any]

    @property
    def name(self) -> str:
        return _stack_name(self.artifact_id, self.artifact)


def _stack_artifacts(directory: Path) -> Iterable[_StackArtifact]:
    """Every stack artifact of the assembly and of the nested assemblies its stages made."""
    artifacts: Mapping[str, Any] = json.loads((directory / "manifest.json").read_text()).get(
        "artifacts", {}
    )
    for artifact_id, artifact in artifacts.items():
        if artifact.get("type") == STACK_ARTIFACT:
            yield _StackArtifact(directory, artifacts, artifact_id, artifact)
        elif artifact.get("type") == NESTED_ASSEMBLY_ARTIFACT:
            nested = artifact.get("properties", {}).get("directoryName")
            if nested:
                yield from _stack_artifacts(directory / str(nested))


def _stack_name(artifact_id: str, artifact: Mapping[str, Any]) -> str:
    return str(artifact.get("properties", {}).get("stackName") or artifact_id)


def _asset_paths(
    assembly_dir: Path, artifacts: Mapping[str, Any], stack: Mapping[str, Any]
) -> dict[str, str]:
    """Object key -> staged folder, from the stack's asset manifests (the S3 keys the template
    names, for a template written without asset metadata)."""
    paths: dict[str, str] = {}
    for dependency in stack.get("dependencies", []):
        artifact = artifacts.get(dependency, {})
        if artifact.get("type") != ASSET_MANIFEST_ARTIFACT:
            continue
        manifest = json.loads((assembly_dir / artifact["properties"]["file"]).read_text())
        for asset in manifest.get("files", {}).values():
            for destination in asset.get("destinations", {}).values():
                paths[str(destination["objectKey"])] = str(asset["source"]["path"])
    return paths


def read_template(
    template: Mapping[str, Any],
    *,
    stack_name: str,
    assembly_dir: Path,
    assets: Mapping[str, str] | None = None,
) -> DeployedApp:
    """The entry points of one stack's template; source folders relative to `assembly_dir`."""
    resources: Resources = template.get("Resources", {})
    functions = {
        logical_id: (marked, _function(logical_id, marked, resource, assembly_dir, assets or {}))
        for logical_id, resource in resources.items()
        if resource.get("Type") == "AWS::Lambda::Function"
        and (marked := _marked(resource)) is not None
    }
    consumers = tuple(
        Consumer(str(marked["id"]), function, _mapped_queue(resources, logical_id))
        for logical_id, (marked, function) in functions.items()
        if function.kind == KIND_CONSUMER
    )
    apis = tuple(
        Api(str(marked["id"]), function, _routes(resources, logical_id, marked))
        for logical_id, (marked, function) in functions.items()
        if function.kind == KIND_API
    )
    subscribers = tuple(
        _subscriber(resources, logical_id, marked, function)
        for logical_id, (marked, function) in functions.items()
        if function.kind == KIND_SUBSCRIBER
    )
    _unique_ids("entry points", [*consumers, *apis, *subscribers])
    topics = _topics(resources, consumers, subscribers)
    _unique_ids("topics", topics)
    return DeployedApp(
        stack_name=stack_name,
        assembly_dir=assembly_dir,
        consumers=consumers,
        apis=apis,
        subscribers=subscribers,
        topics=topics,
        tables=tuple(logical_id for logical_id, _ in _of_type(resources, "AWS::DynamoDB::Table")),
    )


def _unique_ids(what: str, found: Iterable[Consumer | Api | Subscriber | Topic]) -> None:
    """Construct ids name the entry points (the CLI's `--consumer`, the workers' counts, the
    outputs' prefixes): two constructs with one id in different scopes would be one name."""
    logical_ids: dict[str, list[str]] = {}
    for item in found:
        logical = item.logical_id if isinstance(item, Topic) else item.function.logical_id
        logical_ids.setdefault(item.id, []).append(logical)
    twice = {name: ids for name, ids in logical_ids.items() if len(ids) > 1}
    if twice:
        name, ids = sorted(twice.items())[0]
        raise AppModelError(
            f"two {what} have the id {name!r} ({', '.join(sorted(ids))}): the local stack "
            "names them by their construct ids, so give each its own"
        )


def _marked(resource: Mapping[str, Any]) -> Mapping[str, Any] | None:
    marked = resource.get("Metadata", {}).get(ENTRY_POINT_METADATA)
    return marked if isinstance(marked, Mapping) else None


def _reference(value: Any) -> str | None:
    """The logical id a `Ref` or `Fn::GetAtt` names; None for anything else."""
    if isinstance(value, Mapping):
        if isinstance(value.get("Ref"), str):
            return str(value["Ref"])
        attribute = value.get("Fn::GetAtt")
        if isinstance(attribute, list) and attribute:
            return str(attribute[0])
        if isinstance(attribute, str):
            return attribute.split(".", 1)[0]
    return None


def _of_type(resources: Resources, type_: str) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for logical_id, resource in resources.items():
        if resource.get("Type") == type_:
            yield logical_id, resource.get("Properties", {})


def _function(
    logical_id: str,
    marked: Mapping[str, Any],
    resource: Mapping[str, Any],
    assembly_dir: Path,
    assets: Mapping[str, str],
) -> Function:
    kind = str(marked.get("kind"))
    if kind not in SCOPE_VARIABLES:
        raise AppModelError(f"{logical_id}: unknown entry point kind {kind!r}")
    props = resource.get("Properties", {})
    staged = resource.get("Metadata", {}).get("aws:asset:path") or assets.get(
        str(props.get("Code", {}).get("S3Key"))
    )
    if not staged or "Handler" not in props:
        raise AppModelError(
            f"{logical_id} ({marked.get('id')}): no staged code folder or handler in the "
            "assembly (a zip asset from a folder is what the emulator runs)"
        )
    variables = props.get("Environment", {}).get("Variables", {})
    return Function(
        logical_id=logical_id,
        kind=kind,
        handler=str(props["Handler"]),
        # An absolute path stays absolute; a nested assembly's is "../asset.<hash>".
        source_dir=(assembly_dir / str(staged)).resolve(),
        environment={k: v for k, v in variables.items() if isinstance(v, str)},
    )


def _mapped_queue(resources: Resources, function: str) -> str:
    queues = [
        queue
        for _, props in _of_type(resources, "AWS::Lambda::EventSourceMapping")
        if _reference(props.get("FunctionName")) == function
        and (queue := _reference(props.get("EventSourceArn")))
    ]
    if len(queues) != 1:
        raise AppModelError(f"consumer {function} has {len(queues)} event source mappings, not 1")
    return queues[0]


def _routes(
    resources: Resources, function: str, marked: Mapping[str, Any]
) -> tuple[tuple[str, str], ...]:
    """The API Gateway v2 routes whose integration invokes the function, else the metadata's."""
    integrations = {
        logical_id
        for logical_id, props in _of_type(resources, "AWS::ApiGatewayV2::Integration")
        if _reference(props.get("IntegrationUri")) == function
    }
    keys = [
        str(props["RouteKey"])
        for _, props in _of_type(resources, "AWS::ApiGatewayV2::Route")
        if _integration_of(props.get("Target")) in integrations
    ] or [str(key) for key in marked.get("routes", [])]
    if not keys:
        raise AppModelError(f"API {marked.get('id')} ({function}) has no routes")
    routes = []
    for key in keys:
        method, path = key.split(" ", 1)
        routes.append((method.upper(), path))
    return tuple(routes)


def _integration_of(target: Any) -> str | None:
    """`integrations/<id>`, written as a Fn::Join of the literal and a Ref."""
    if isinstance(target, Mapping) and isinstance(target.get("Fn::Join"), list):
        _, parts = target["Fn::Join"]
        return next((ref for part in parts if (ref := _reference(part))), None)
    return None


def _subscriber(
    resources: Resources, function: str, marked: Mapping[str, Any], built: Function
) -> Subscriber:
    topics = [
        topic
        for _, props in _of_type(resources, "AWS::SNS::Subscription")
        if props.get("Protocol") == "lambda"
        and _reference(props.get("Endpoint")) == function
        and (topic := _reference(props.get("TopicArn")))
    ]
    named = _reference(marked.get("topic"))
    if named:
        topics.append(named)
    if len(set(topics)) != 1 or set(topics) - set(resources):
        raise AppModelError(
            f"subscriber {marked.get('id')} ({function}) is subscribed to {sorted(set(topics))}: "
            "the emulator delivers one topic of this stack to it"
        )
    retries, destination = LAMBDA_DEFAULT_RETRIES, None
    for _, props in _of_type(resources, "AWS::Lambda::EventInvokeConfig"):
        if _reference(props.get("FunctionName")) == function:
            retries = int(props.get("MaximumRetryAttempts", LAMBDA_DEFAULT_RETRIES))
            on_failure = props.get("DestinationConfig", {}).get("OnFailure", {})
            destination = _reference(on_failure.get("Destination"))
    return Subscriber(str(marked["id"]), built, topics[0], retries, destination)


def _topics(
    resources: Resources, consumers: tuple[Consumer, ...], subscribers: tuple[Subscriber, ...]
) -> tuple[Topic, ...]:
    """Every topic a construct marked or an entry point hears from, with its receivers."""
    fan_out: dict[str, list[str]] = {}  # topic -> queue logical ids
    for logical_id, props in _of_type(resources, "AWS::SNS::Topic"):
        for inline in props.get("Subscription", []) or []:
            if inline.get("Protocol") == "sqs" and (queue := _reference(inline.get("Endpoint"))):
                fan_out.setdefault(logical_id, []).append(queue)
    for _, props in _of_type(resources, "AWS::SNS::Subscription"):
        topic, queue = _reference(props.get("TopicArn")), _reference(props.get("Endpoint"))
        if props.get("Protocol") == "sqs" and topic and queue:
            fan_out.setdefault(topic, []).append(queue)
    topics = []
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::SNS::Topic":
            continue
        marked = _marked(resource)
        queues = fan_out.get(logical_id, [])
        fed = tuple(c.id for c in consumers if c.queue in queues)
        direct = tuple(s.id for s in subscribers if s.topic == logical_id)
        is_topic = marked is not None and marked.get("kind") == KIND_TOPIC
        if is_topic or fed or direct:
            name = str(marked["id"]) if marked is not None and is_topic else logical_id
            topics.append(Topic(name, logical_id, fed, direct))
    return tuple(topics)
