"""`invoke`: run a consumer's handler in this process with a sample event, like Lambda would.

The function's environment (and its handler name) come from the deployed function, found
through the stack's `<Consumer>FunctionName` output, unless given with --env / --handler, so the
handler talks to the same tables and DLQ as the deployed one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from exactly_once import clients
from exactly_once_cdk.outputs import FUNCTION_NAME
from exactly_once_cli.common import CliError, StackOption, aws_target, name_values, stdout
from exactly_once_ops.handlers import load_handler
from exactly_once_ops.lambda_context import LocalLambdaContext
from exactly_once_ops.targets import (
    DEFAULT_STACK,
    AwsTarget,
    consumer_output,
    stack_outputs,
)

DEFAULT_HANDLER = "handler.handle"


def read_event(event: str) -> Any:
    text = sys.stdin.read() if event == "-" else Path(event).read_text()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{event}: not JSON ({exc})") from exc


def deployed_configuration(target: AwsTarget, consumer: str, stack: str) -> dict[str, Any]:
    """The deployed function's configuration, found through the stack's outputs."""
    outputs = stack_outputs(target.cloudformation(), stack)
    function = consumer_output(outputs, consumer, FUNCTION_NAME, stack)
    return dict(target.client("lambda").get_function_configuration(FunctionName=function))


def _point_clients_at(target: AwsTarget) -> None:
    """The handler's own clients read the environment: give it the global options' account."""
    settings = {
        "AWS_PROFILE": target.profile,
        "AWS_REGION": target.region,
        "AWS_DEFAULT_REGION": target.region,
        "AWS_ENDPOINT_URL": target.endpoint_url,
    }
    os.environ.update({name: value for name, value in settings.items() if value})
    clients.reset()


def source_folder(consumer: str, source: Path | None) -> Path:
    """--source, else this repository's layout: `functions/<consumer>` under the working dir."""
    folder = source or Path("functions") / consumer.lower()
    if not folder.is_dir():
        raise CliError(f"no handler source at {folder}: pass --source DIR (the function's code)")
    return folder


def invoke_cmd(
    ctx: typer.Context,
    consumer: Annotated[str, typer.Argument(help="The consumer, as the stack names it: orders.")],
    event: Annotated[
        str, typer.Option("--event", "-e", help="An events/ file, or - for stdin.")
    ] = "-",
    source: Annotated[
        Path | None,
        typer.Option(help="The function's code folder (default: functions/<consumer>)."),
    ] = None,
    handler: Annotated[
        str | None,
        typer.Option(help="module.function (default: the deployed one, else handler.handle)."),
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
    """Run a consumer's handler on an event and print the partial-batch response."""
    folder = source_folder(consumer, source)
    payload = read_event(event)
    config = deployed_configuration(aws_target(ctx), consumer, stack) if from_stack else {}
    environment = dict(config.get("Environment", {}).get("Variables", {}))
    environment.update(name_values(env or [], "--env"))
    if not (environment.get("IDEMPOTENCY_TABLE") or os.environ.get("IDEMPOTENCY_TABLE")):
        raise CliError("IDEMPOTENCY_TABLE is not set: deploy the stack or pass --env")
    os.environ.update(environment)
    _point_clients_at(aws_target(ctx))
    try:
        function = load_handler(str(folder), handler or config.get("Handler") or DEFAULT_HANDLER)
    except (ImportError, AttributeError, SyntaxError) as exc:
        raise CliError(f"cannot load the handler from {folder}: {exc}") from exc
    response = function(payload, LocalLambdaContext(f"local-{consumer.lower()}", timeout_s=timeout))

    console = stdout()
    results = getattr(function, "last_results", [])
    table = Table(title=f"{consumer}: {len(results)} record(s)")
    for column in ("messageId", "key", "outcome", "reported failed", "fence", "reason"):
        table.add_column(column)
    for r in results:
        table.add_row(
            r.message_id,
            r.key or "-",
            r.outcome.value,
            "yes" if r.report_failure else "no",
            str(r.fence or "-"),
            r.reason or "",
        )
    console.print(table)
    console.print_json(json.dumps(response))
