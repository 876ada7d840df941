"""`invoke`: run a consumer's, an API's, a topic subscriber's or a stream consumer's handler in
this process with a sample event, like Lambda would.

The function's environment (and its handler name) come from the deployed function, found
through the stack's `<Consumer>FunctionName` output, unless given with --env / --handler, so the
handler talks to the same tables and DLQ as the deployed one.

The code comes from the app, whatever the app: --source, else the folder the local stack's
cloud assembly staged for the entry point (when the served stack is the target), else the one
`cdk synth` left in ./cdk.out. Nothing is read from this repository's `infra/`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from exactly_once import clients
from exactly_once_cdk.outputs import FUNCTION_NAME
from exactly_once_cli.common import (
    CliError,
    StackOption,
    aws_target,
    fail,
    name_values,
    stderr,
    stdout,
)
from exactly_once_cli.stream_invoke import (
    DYNAMODB,
    KAFKA,
    KINESIS,
    check_stream_event,
    resume_positions,
    stream_event_kind,
)
from exactly_once_ops.app_model import (
    Api,
    AppModelError,
    Consumer,
    DeployedApp,
    Function,
    StreamConsumer,
    Subscriber,
)
from exactly_once_ops.handlers import load_handler, with_layers
from exactly_once_ops.lambda_context import LocalLambdaContext
from exactly_once_ops.local_state import default_paths
from exactly_once_ops.sns_events import is_sns_event
from exactly_once_ops.targets import (
    DEFAULT_STACK,
    AwsTarget,
    Endpoint,
    consumer_output,
    functions_in,
    no_such_name,
    stack_outputs,
)

DEFAULT_HANDLER = "handler.handle"


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def read_event(event: str) -> Any:
    """The event from a file or stdin; a terminal on stdin is refused rather than waited on."""
    if event == "-" and stdin_is_terminal():
        raise CliError("give --event FILE or pipe an event on stdin")
    text = sys.stdin.read() if event == "-" else Path(event).read_text()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{event}: not JSON ({exc})") from exc


def is_api_event(event: Any) -> bool:
    """An API Gateway (REST, HTTP API) or function URL event: it names an HTTP method."""
    if not isinstance(event, dict):
        return False
    context = event.get("requestContext")
    http = context.get("http") if isinstance(context, dict) else None
    return isinstance(event.get("httpMethod"), str) or (
        event.get("version") == "2.0" and isinstance(http, dict)
    )


def check_sns_event(event: Any, source: str) -> None:
    """Refuse an SNS record without the fields every subscriber reads."""
    for index, record in enumerate(event["Records"]):
        sns = record["Sns"]
        if not all(isinstance(sns.get(name), str) for name in ("MessageId", "Message", "TopicArn")):
            raise CliError(
                f"{source}: Records[{index}].Sns needs MessageId, Message and TopicArn strings"
            )


def check_sqs_event(event: Any, source: str) -> None:
    """Refuse what Lambda's SQS event source would never send: the handler would accept it
    silently (no records, nothing to do) and the run would prove nothing.
    """
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list) or not records:
        raise CliError(
            f"{source}: not an SQS event (no Records list; see `eonce event`), nor an SNS event "
            "(see events/sns-*.json), nor an API Gateway event (no HTTP method; see "
            "events/api-*.json), nor a stream event (see events/stream-*.json, "
            "events/kafka-*.json)"
        )
    for index, record in enumerate(records):
        if not isinstance(record, dict) or not isinstance(record.get("messageId"), str):
            raise CliError(f"{source}: Records[{index}] is not an SQS record (no messageId)")
        origin = record.get("eventSource", "aws:sqs")
        if origin != "aws:sqs":
            raise CliError(f"{source}: Records[{index}] comes from {origin}, not aws:sqs")


def check_function_name(outputs: Mapping[str, str], name: str, stack: str) -> None:
    """Refuse a name that is none of the stack's functions, listing those there are."""
    known = functions_in(outputs)
    if name.lower() not in (found.lower() for found in known):
        raise no_such_name("consumer, API or subscriber", name, stack, known, listed="they are")


STREAM_KINDS = (KINESIS, DYNAMODB, KAFKA)
KINDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    # the library's entry point: (what it is, the events it takes, their samples)
    "SqsConsumer": ("a queue consumer", ("SQS",), "events/orders-*.json, `eonce event`"),
    "SnsSubscriber": ("a topic subscriber", ("SNS",), "events/sns-*.json"),
    "IdempotentApi": ("an HTTP API", ("API Gateway",), "events/api-*.json"),
    "StreamConsumer": (
        "a stream consumer",
        STREAM_KINDS,
        "events/stream-*.json, events/kafka-*.json",
    ),
}


def an_event(kind: str) -> str:
    """ "an SQS event", "a Kinesis event"."""
    return f"{'a' if kind in STREAM_KINDS else 'an'} {kind} event"


def check_event_kind(function: Any, name: str, event_kind: str, source: str) -> None:
    """Refuse an event Lambda would never deliver to this kind of function: the handler would
    answer it with a misleading outcome (a 400 that exits 0, a record "reported failed").
    A handler that is none of the library's entry points is not checked."""
    for cls in type(function).__mro__:
        if cls.__module__.startswith("exactly_once.") and cls.__name__ in KINDS:
            what, takes, samples = KINDS[cls.__name__]
            if event_kind not in takes:
                listed = f"{', '.join(takes[:-1])} and {takes[-1]}" if len(takes) > 1 else takes[0]
                raise CliError(
                    f"{source}: {an_event(event_kind)}, but {name} is {what}: it takes "
                    f"{listed} events (see {samples})"
                )
            return


def deployed_configuration(
    target: AwsTarget, outputs: Mapping[str, str], consumer: str, stack: str
) -> dict[str, Any]:
    """The deployed function's configuration, found through the stack's outputs."""
    function = consumer_output(outputs, consumer, FUNCTION_NAME, stack)
    return dict(target.client("lambda").get_function_configuration(FunctionName=function))


def point_clients_at(target: AwsTarget, dynamodb: Endpoint) -> None:
    """The handler's own clients read the environment: give them the CLI's account, region
    and DynamoDB endpoint (and the local stack's credentials, when it is the target).

    Both region variables are set because botocore reads only AWS_DEFAULT_REGION (Lambda sets
    both); without it every record would fail with NoRegionError.
    """
    settings = {
        "AWS_PROFILE": target.profile,
        "AWS_REGION": target.region_name,
        "AWS_DEFAULT_REGION": target.region_name,
        "AWS_ENDPOINT_URL": target.endpoint_url,
        "AWS_ENDPOINT_URL_DYNAMODB": dynamodb.url,
    }
    if target.local is not None:  # found by itself: its test credentials, not the shell's
        settings.update(target.local.credentials())
    os.environ.update({name: value for name, value in settings.items() if value})
    clients.reset()


@dataclass(frozen=True)
class CodeFolder:
    """Where a function's code is, the handler the app gives it (None for --source) and the
    folders of its own layers (what Lambda puts on the path from /opt/python)."""

    folder: Path
    handler: str | None = None
    layers: tuple[Path, ...] = ()


def served_assemblies(target: AwsTarget) -> list[Path]:
    """The cloud assemblies the local stack was deployed from, when it is the target (found by
    itself, or named by its own endpoint, as `eval "$(eonce env)"` names it). They are in the
    state folder's `assemblies/` (local_aws.serve deploys there: `cdk.out.local-*/assembly`)."""
    paths = default_paths()
    state = paths.running() if paths is not None else None
    if paths is None or state is None:
        return []
    if target.local is None and target.endpoint_url != state.endpoint_url:
        return []
    if state.assembly_dir is not None:  # up.json says which (a state written before: search)
        return [Path(state.assembly_dir)]
    for depth in range(1, 4):  # the shallowest: an assembly's own folders hold deeper ones
        pattern = "/".join(["*"] * depth + ["manifest.json"])
        found = sorted(manifest.parent for manifest in paths.assemblies.glob(pattern))
        if found:
            return found
    return []


def entry_points(app: DeployedApp) -> dict[str, Function]:
    """Every consumer, API, subscriber and stream consumer of the app by its id."""
    points: list[Consumer | Api | Subscriber | StreamConsumer] = [
        *app.consumers,
        *app.apis,
        *app.subscribers,
        *app.stream_consumers,
    ]
    return {point.id: point.function for point in points}


def from_assembly(assembly: Path, name: str, stack: str, served: bool) -> CodeFolder | None:
    """The code folder the assembly's stack gives the entry point `name` (any case). `stack`
    picks one of several stacks; the served stack's assembly is read for that stack only,
    `cdk.out` for its one stack when `stack` is none of them. A name the stack lacks is a
    misspelt name there (TargetError), not a missing folder."""
    from local_aws.cloud_assembly import read_assembly  # the reader the local stack uses

    try:
        app = read_assembly(assembly, stack)
    except AppModelError as exc:
        if served:
            return None
        try:
            app = read_assembly(assembly)
        except AppModelError:
            raise CliError(f"no code folder for {name!r}: {exc} (pick one with --stack)") from None
    functions = entry_points(app)
    for found, function in functions.items():
        if found.lower() == name.lower():
            try:
                return CodeFolder(function.code_folder(), function.handler, function.layer_dirs)
            except AppModelError as exc:
                raise CliError(f"no code folder for {name!r}: {exc}") from None
    raise no_such_name(
        "consumer, API or subscriber", name, app.stack_name, list(functions), listed="they are"
    )


def source_folder(name: str, source: Path | None, target: AwsTarget, stack: str) -> CodeFolder:
    """--source; else the assembly the local stack serves (when it is the target); else the
    current folder's `cdk.out`, as `cdk synth` leaves it. Each names the folder by the entry
    point's construct id, whatever the app: a subscriber's id need not match its folder."""
    if source is not None:
        if not source.is_dir():
            raise CliError(
                f"no handler source at {source}: pass --source DIR (the function's code)"
            )
        return CodeFolder(source)
    for assembly in served_assemblies(target):
        found = from_assembly(assembly, name, stack, served=True)
        if found is not None:
            return found
    manifest = Path("cdk.out") / "manifest.json"
    if manifest.is_file():
        found = from_assembly(Path("cdk.out"), name, stack, served=False)
        if found is not None:
            # The assembly holds a copy of the code as it was at the synth, not the source.
            synthesized = datetime.fromtimestamp(manifest.stat().st_mtime).strftime("%H:%M:%S")
            stderr().print(
                f"code from ./cdk.out as synthesized at {synthesized} (`cdk synth` again after "
                "editing it, or pass --source)",
                markup=False,
            )
            return found
    raise CliError(f"no code folder for {name!r}: pass --source DIR, or run `cdk synth` here")


def reported_failures(response: Any) -> list[str]:
    """The messageIds the handler's response lists in batchItemFailures."""
    failures = response.get("batchItemFailures") if isinstance(response, dict) else None
    if not isinstance(failures, list):
        return []
    return [str(item.get("itemIdentifier")) for item in failures if isinstance(item, dict)]


def print_results(consumer: str, results: list[Any], *, stream: bool = False) -> None:
    """Each record's outcome, as the layer's `last_results` has it. A stream record is named by
    its position, and every record from its shard's first failure on is redelivered."""
    table = Table(title=f"{consumer}: {len(results)} record(s)")
    columns = ("position", "redelivered") if stream else ("messageId", "reported failed")
    for column in (columns[0], "key", "outcome", columns[1], "fence", "reason"):
        table.add_column(column)
    for r in results:
        table.add_row(  # keys and reasons are the application's text, never rich markup
            Text(r.message_id),
            Text(r.key or "-"),
            r.outcome.value,
            "yes" if r.report_failure else "no",
            str(r.fence or "-"),
            Text(r.reason or ""),
        )
    stdout().print(table)


def print_api_result(name: str, response: Any, result: Any) -> int:
    """The request's outcome and the proxy response; the exit code (1 for a 5xx)."""
    status = response.get("statusCode") if isinstance(response, dict) else None
    if result is not None:
        stdout().print(
            f"{name}: {result.outcome.value} -> HTTP {status} (key {result.key or '-'}, "
            f"fence {result.fence or '-'})",
            markup=False,
        )
    stdout().print_json(json.dumps(response, default=str))
    return 1 if not isinstance(status, int) or status >= 500 else 0


def invoke_cmd(
    ctx: typer.Context,
    consumer: Annotated[
        str,
        typer.Argument(
            help="The consumer, API, topic subscriber or stream consumer, by its construct id "
            "in any case (`eonce consumers` lists them)."
        ),
    ],
    event: Annotated[
        str, typer.Option("--event", "-e", help="An events/ file, or - for piped stdin.")
    ] = "-",
    source: Annotated[
        Path | None,
        typer.Option(
            help="The function's code folder (default: the local stack's, else ./cdk.out's, "
            "as `cdk synth` leaves it)."
        ),
    ] = None,
    handler: Annotated[
        str | None,
        typer.Option(
            help="module.function (default: the deployed one, else the app's, else handler.handle)."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(min=0.1, help="The context's timeout (s).")] = 30,
    env: Annotated[
        list[str] | None, typer.Option(help="NAME=VALUE for the function (repeatable).")
    ] = None,
    from_stack: Annotated[
        bool, typer.Option(help="Take the function's environment from the deployed stack.")
    ] = True,
    stack: StackOption = DEFAULT_STACK,
) -> None:
    """Run a handler on an SQS, SNS, API Gateway or stream event and print the outcome and the
    response.

    The handler's clients use the global --profile/--region/--endpoint-url and the stack's
    DynamoDB endpoint. SQS: exit 0 when no record is left for SQS to redeliver (processed,
    duplicate, or sent to the DLQ by the layer); 1 when the handler raised or reported any
    record failed (SQS would redeliver it). SNS: exit 0 when the handler returned (processed,
    duplicate, or dead-lettered as permanent); 1 when it raised (Lambda would retry the event,
    then send it to the function's DLQ). API: exit 0 for any answer but a 5xx, 1 for a 5xx.
    Stream (Kinesis, DynamoDB Streams, Kafka): exit 0 when the response names nothing to
    retry (batchItemFailures empty); 1 when it names a position to resume at (the event source
    mapping would redeliver from there) or the handler raised. Exit 2 when the input is none
    of these.
    """
    payload = read_event(event)
    api = is_api_event(payload)
    sns = not api and is_sns_event(payload)
    stream = None if api or sns else stream_event_kind(payload)
    where = "stdin" if event == "-" else event
    if sns:
        check_sns_event(payload, where)
    elif stream is not None:
        check_stream_event(payload, stream, where)
    elif not api:
        check_sqs_event(payload, where)
    target = aws_target(ctx)
    outputs = stack_outputs(target.cloudformation(), stack) if from_stack else {}
    if from_stack:  # a misspelt name is named as such, not blamed on a missing code folder
        check_function_name(outputs, consumer, stack)
    given = name_values(env or [], "--env")
    config = deployed_configuration(target, outputs, consumer, stack) if from_stack else {}
    located = source_folder(consumer, source, target, stack)
    folder = located.folder
    environment = with_layers(config.get("Environment", {}).get("Variables", {}), located.layers)
    environment.update(given)
    if not (environment.get("IDEMPOTENCY_TABLE") or os.environ.get("IDEMPOTENCY_TABLE")):
        raise CliError("IDEMPOTENCY_TABLE is not set: deploy the stack or pass --env")
    os.environ.update(environment)
    dynamodb = target.endpoint("dynamodb", outputs)
    point_clients_at(target, dynamodb)
    stderr().print(f"region {target.region_name}; DynamoDB at {dynamodb}", markup=False)
    try:
        function = load_handler(
            str(folder), handler or config.get("Handler") or located.handler or DEFAULT_HANDLER
        )
    except (ImportError, AttributeError, SyntaxError) as exc:
        raise CliError(f"cannot load the handler from {folder}: {exc}") from exc
    check_event_kind(
        function, consumer, "API Gateway" if api else "SNS" if sns else stream or "SQS", where
    )
    context = LocalLambdaContext(
        f"local-{consumer.lower()}", timeout_s=timeout, region=target.region_name
    )
    try:
        response = function(payload, context)
    except Exception as exc:  # Lambda would retry the whole batch (the SNS event)
        if sns:
            print_results(consumer, getattr(function, "last_results", []))
            what = "Lambda would retry the event, then send it to the function's DLQ"
        elif api:
            what = "API Gateway would answer 502"
        elif stream is not None:
            what = (
                "the event source mapping would retry the whole batch, or split it in two with "
                "BisectBatchOnFunctionError"
            )
        else:
            what = "every record would be retried"
        fail(f"the handler raised {type(exc).__name__}: {exc} ({what})")
    if api:
        code = print_api_result(consumer, response, getattr(function, "last_result", None))
        if code:
            raise typer.Exit(code)
        return
    if stream is not None:
        print_results(consumer, getattr(function, "last_results", []), stream=True)
        stdout().print_json(json.dumps(response, default=str))
        positions = resume_positions(response)
        if positions:
            fail(
                f"the batch resumes at {', '.join(positions)}: the event source mapping would "
                "redeliver from there"
            )
        return

    print_results(consumer, getattr(function, "last_results", []))
    stdout().print_json(json.dumps(response, default=str))
    failed = reported_failures(response)
    if failed:
        fail(f"{len(failed)} record(s) reported failed: SQS would redeliver them")
