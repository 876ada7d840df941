"""A deployed stack's entry points read from its template alone, as SAM reads one: the one
reader of the constructs' wiring, for the local emulator and the operator's tools alike.

Every function that an `exactly_once_cdk` construct marked with its metadata
(`ENTRY_POINT_METADATA`: the kind and the construct id, which are also the outputs' prefixes)
is an entry point. Its handler and plain environment are the template's. The wiring is the
template's own resources: an event source mapping ties a consumer to its queue (and a stream
consumer to its stream or table, or to a Kafka cluster outside the stack: the metadata's
"source" says which kind), a Lambda subscription (or the metadata's "topic" when the construct
left it out) a subscriber to its topic, SQS subscriptions (resources, or the topic's inline
`Subscription` entries) a topic to the queues it fans out to, API Gateway v2 routes and
integrations (or the metadata's "routes") an API to its paths, and an
`AWS::Lambda::EventInvokeConfig` a subscriber to its retries and on-failure queue. Every
`AWS::DynamoDB::Table` is listed too (the local stack mirrors them all into DynamoDB Local,
where the functions' calls go). Construct ids name the entry points, so two with one id (in
different scopes) are refused.

A function's code folder is found only when the template is read with its cloud assembly
(`assembly_dir`: the staged asset folder, by `aws:asset:path` or by the asset manifest's entry
for its S3 key, `assets`); `local_aws.cloud_assembly` reads the assembly. A template read from
CloudFormation gives the same entry points, wiring and topics, without code folders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from exactly_once_cdk.outputs import (
    ENTRY_POINT_METADATA,
    KIND_API,
    KIND_CONSUMER,
    KIND_STREAM,
    KIND_SUBSCRIBER,
    KIND_TOPIC,
    STREAM_SOURCES,
)
from exactly_once_ops.app_model import (
    LAMBDA_DEFAULT_RETRIES,
    SCOPE_VARIABLES,
    Api,
    AppModelError,
    Consumer,
    DeployedApp,
    Function,
    StreamConsumer,
    Subscriber,
    Topic,
)

Resources = Mapping[str, Mapping[str, Any]]


def read_template(
    template: Mapping[str, Any],
    *,
    stack_name: str,
    assembly_dir: Path | None = None,
    assets: Mapping[str, str] | None = None,
) -> DeployedApp:
    """The entry points of one stack's template; code folders relative to `assembly_dir`, and
    none without it (a template read from CloudFormation)."""
    resources: Resources = template.get("Resources") or {}
    functions = {
        logical_id: (
            marked,
            _function(logical_id, marked, resource, assembly_dir, assets or {}, resources),
        )
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
    streams = tuple(
        _stream_consumer(resources, logical_id, marked, function)
        for logical_id, (marked, function) in functions.items()
        if function.kind == KIND_STREAM
    )
    _unique_ids("entry points", [*consumers, *apis, *subscribers, *streams])
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
        stream_consumers=streams,
    )


def subscribed_topic_values(resources: Resources, function: str) -> list[Any]:
    """The topics the template subscribes the function (by logical id) to, as it writes them
    (a `Ref` or `Fn::GetAtt` of a topic in the stack, or an ARN): each `lambda`
    `AWS::SNS::Subscription` whose endpoint is the function, then the `topic` of the
    constructs' metadata on the function (a subscriber made without its subscription)."""
    values = [
        props.get("TopicArn")
        for _, props in _of_type(resources, "AWS::SNS::Subscription")
        if props.get("Protocol") == "lambda" and reference(props.get("Endpoint")) == function
    ]
    marked = _marked(resources.get(function) or {})
    if marked is not None and marked.get("topic"):
        values.append(marked["topic"])
    return values


def reference(value: Any) -> str | None:
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


def _unique_ids(
    what: str, found: Iterable[Consumer | Api | Subscriber | StreamConsumer | Topic]
) -> None:
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
    marked = (resource.get("Metadata") or {}).get(ENTRY_POINT_METADATA)
    return marked if isinstance(marked, Mapping) else None


def _of_type(resources: Resources, type_: str) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for logical_id, resource in resources.items():
        if resource.get("Type") == type_:
            yield logical_id, resource.get("Properties") or {}


def _function(
    logical_id: str,
    marked: Mapping[str, Any],
    resource: Mapping[str, Any],
    assembly_dir: Path | None,
    assets: Mapping[str, str],
    resources: Resources,
) -> Function:
    kind = str(marked.get("kind"))
    if kind not in SCOPE_VARIABLES:
        raise AppModelError(f"{logical_id}: unknown entry point kind {kind!r}")
    props = resource.get("Properties") or {}
    source_dir = None
    if assembly_dir is not None:
        staged = (resource.get("Metadata") or {}).get("aws:asset:path") or assets.get(
            str((props.get("Code") or {}).get("S3Key"))
        )
        if not staged or "Handler" not in props:
            raise AppModelError(
                f"{logical_id} ({marked.get('id')}): no staged code folder or handler in the "
                "assembly (a zip asset from a folder is what the emulator runs)"
            )
        # An absolute path stays absolute; a nested assembly's is "../asset.<hash>".
        source_dir = (assembly_dir / str(staged)).resolve()
    elif "Handler" not in props:
        raise AppModelError(f"{logical_id} ({marked.get('id')}): no handler in the template")
    variables = (props.get("Environment") or {}).get("Variables") or {}
    return Function(
        logical_id=logical_id,
        kind=kind,
        handler=str(props["Handler"]),
        source_dir=source_dir,
        environment={k: v for k, v in variables.items() if isinstance(v, str)},
        layer_dirs=_layer_dirs(props, resources, assembly_dir, assets),
    )


def _layer_dirs(
    props: Mapping[str, Any],
    resources: Resources,
    assembly_dir: Path | None,
    assets: Mapping[str, str],
) -> tuple[Path, ...]:
    """The folders Lambda puts on the path for the function's layers that the app staged from
    a folder (an ARN of a published layer has no code here and is skipped), in the order a
    module is found in Lambda's merged /opt: every `python/lib/<runtime>/site-packages` (what
    pip's `--target` there makes), then every `python/`; each the last layer's first, as a
    later layer's file overwrites an earlier one's when Lambda extracts them in order."""
    if assembly_dir is None:
        return ()
    runtime = str(props.get("Runtime") or "")
    site_packages = Path("lib", runtime, "site-packages") if runtime.startswith("python") else None
    found: list[Path] = []
    pythons: list[Path] = []
    for layer in props.get("Layers") or []:
        resource = resources.get(reference(layer) or "")
        if not resource or resource.get("Type") != "AWS::Lambda::LayerVersion":
            continue
        content = (resource.get("Properties") or {}).get("Content") or {}
        staged = (resource.get("Metadata") or {}).get("aws:asset:path") or assets.get(
            str(content.get("S3Key"))
        )
        if staged and (python := (assembly_dir / str(staged)).resolve() / "python").is_dir():
            pythons.insert(0, python)
            if site_packages is not None and (python / site_packages).is_dir():
                found.insert(0, python / site_packages)
    return (*found, *pythons)


def _mapped_queue(resources: Resources, function: str) -> str:
    queues = [
        queue
        for _, props in _of_type(resources, "AWS::Lambda::EventSourceMapping")
        if reference(props.get("FunctionName")) == function
        and (queue := reference(props.get("EventSourceArn")))
    ]
    if len(queues) != 1:
        raise AppModelError(f"consumer {function} has {len(queues)} event source mappings, not 1")
    return queues[0]


def _stream_consumer(
    resources: Resources, function: str, marked: Mapping[str, Any], built: Function
) -> StreamConsumer:
    """A stream consumer reads one source through one event source mapping; the stream (or
    table) it names is the stack's, else None (a Kafka cluster, a stream made elsewhere)."""
    source = str(marked.get("source"))
    if source not in STREAM_SOURCES:
        raise AppModelError(
            f"stream consumer {marked.get('id')} ({function}): unknown source {source!r}"
        )
    arns = [
        props.get("EventSourceArn")
        for _, props in _of_type(resources, "AWS::Lambda::EventSourceMapping")
        if reference(props.get("FunctionName")) == function
    ]
    if len(arns) != 1:
        raise AppModelError(
            f"stream consumer {marked.get('id')} ({function}) has {len(arns)} event source "
            "mappings, not 1"
        )
    stream = reference(arns[0])
    return StreamConsumer(str(marked["id"]), built, source, stream if stream in resources else None)


def _routes(
    resources: Resources, function: str, marked: Mapping[str, Any]
) -> tuple[tuple[str, str], ...]:
    """The API Gateway v2 routes whose integration invokes the function, else the metadata's."""
    integrations = {
        logical_id
        for logical_id, props in _of_type(resources, "AWS::ApiGatewayV2::Integration")
        if reference(props.get("IntegrationUri")) == function
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
        return next((ref for part in parts if (ref := reference(part))), None)
    return None


def _subscriber(
    resources: Resources, function: str, marked: Mapping[str, Any], built: Function
) -> Subscriber:
    """The emulator delivers one topic of this stack to a subscriber: an ARN from elsewhere
    or a second topic is refused."""
    topics = [
        topic
        for value in subscribed_topic_values(resources, function)
        if (topic := reference(value))
    ]
    if len(set(topics)) != 1 or set(topics) - set(resources):
        raise AppModelError(
            f"subscriber {marked.get('id')} ({function}) is subscribed to {sorted(set(topics))}: "
            "the emulator delivers one topic of this stack to it"
        )
    retries, destination = LAMBDA_DEFAULT_RETRIES, None
    for _, props in _of_type(resources, "AWS::Lambda::EventInvokeConfig"):
        if reference(props.get("FunctionName")) == function:
            retries = int(props.get("MaximumRetryAttempts", LAMBDA_DEFAULT_RETRIES))
            on_failure = (props.get("DestinationConfig") or {}).get("OnFailure") or {}
            destination = reference(on_failure.get("Destination"))
    return Subscriber(str(marked["id"]), built, topics[0], retries, destination)


def _topics(
    resources: Resources, consumers: tuple[Consumer, ...], subscribers: tuple[Subscriber, ...]
) -> tuple[Topic, ...]:
    """Every topic a construct marked or an entry point hears from, with its receivers."""
    fan_out: dict[str, list[str]] = {}  # topic -> queue logical ids
    for logical_id, props in _of_type(resources, "AWS::SNS::Topic"):
        for inline in props.get("Subscription", []) or []:
            if inline.get("Protocol") == "sqs" and (queue := reference(inline.get("Endpoint"))):
                fan_out.setdefault(logical_id, []).append(queue)
    for _, props in _of_type(resources, "AWS::SNS::Subscription"):
        topic, queue = reference(props.get("TopicArn")), reference(props.get("Endpoint"))
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
