"""`invoke`: run a consumer's handler in this process with a sample event, like Lambda would.

The function's environment comes from the deployed function (local stack or AWS) unless given
with --env, so the handler talks to the same tables and DLQ as the deployed one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from infra.consumers import CONSUMERS, ConsumerSpec
from tools.cli_common import CliError, aws_target, stdout
from tools.lambda_context import LocalLambdaContext
from tools.poller import load_handler
from tools.targets import DEFAULT_STACK, AwsTarget, stack_outputs


def consumer_spec(name: str) -> ConsumerSpec:
    for spec in CONSUMERS:
        if name.lower() in (spec.id.lower(), spec.scope.lower()):
            return spec
    known = ", ".join(s.scope for s in CONSUMERS)
    raise CliError(f"unknown consumer {name!r}: expected one of {known}")


def read_event(event: str) -> Any:
    text = sys.stdin.read() if event == "-" else Path(event).read_text()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{event}: not JSON ({exc})") from exc


def deployed_environment(target: AwsTarget, spec: ConsumerSpec, stack: str) -> dict[str, str]:
    """The deployed function's environment variables, found through the stack's outputs."""
    outputs = stack_outputs(target.cloudformation(), stack)
    function = outputs.get(f"{spec.id}FunctionName")
    if not function:
        raise CliError(f"stack {stack!r} has no output {spec.id}FunctionName")
    config = target.client("lambda").get_function_configuration(FunctionName=function)
    return dict(config.get("Environment", {}).get("Variables", {}))


def parse_env(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CliError(f"--env expects NAME=VALUE, got {pair!r}")
        env[name] = value
    return env


def invoke_cmd(
    ctx: typer.Context,
    consumer: Annotated[str, typer.Argument(help="orders or payments")],
    event: Annotated[
        str, typer.Option("--event", "-e", help="An events/ file, or - for stdin.")
    ] = "-",
    timeout: Annotated[float, typer.Option(min=0.1, help="The context's timeout (s).")] = 30,
    env: Annotated[
        list[str] | None, typer.Option(help="NAME=VALUE for the function (repeatable).")
    ] = None,
    from_stack: Annotated[
        bool, typer.Option(help="Take the function's environment from the deployed stack.")
    ] = True,
    stack: Annotated[str, typer.Option(help="Stack name for --from-stack.")] = DEFAULT_STACK,
) -> None:
    """Run a consumer's handler on an event and print the partial-batch response."""
    spec = consumer_spec(consumer)
    payload = read_event(event)
    environment = deployed_environment(aws_target(ctx), spec, stack) if from_stack else {}
    environment.update(parse_env(env or []))
    if not (environment.get("IDEMPOTENCY_TABLE") or os.environ.get("IDEMPOTENCY_TABLE")):
        raise CliError("IDEMPOTENCY_TABLE is not set: deploy the stack or pass --env")
    os.environ.update(environment)
    handler = load_handler(str(spec.source_path), spec.handler)
    response = handler(payload, LocalLambdaContext(f"local-{spec.scope}", timeout_s=timeout))

    console = stdout()
    table = Table(title=f"{spec.id}: {len(getattr(handler, 'last_results', []))} record(s)")
    for column in ("messageId", "key", "outcome", "reported failed", "fence", "reason"):
        table.add_column(column)
    for r in getattr(handler, "last_results", []):
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
