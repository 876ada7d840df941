"""The operator CLI: `eonce [global options] COMMAND ...`.

Global options pick the account or emulator; each command lives in its own module and is
registered here with one line, e.g. `app.command("invoke")(invoke_cmd)` or
`app.add_typer(locks_app, name="locks")`. `up`, `down` and `env` drive the embedded local AWS
(the `local` extra); `run`, `chaos`, `workload` and `report` drive this repository's example app
and chaos harness, which come with a checkout, not with the package; without them they say so.
"""

from __future__ import annotations

import importlib.util
from typing import Annotated, Any

import typer
from typer import _click

from exactly_once_cli.common import CliError, OneLineErrorGroup
from exactly_once_cli.complete import complete_cmd
from exactly_once_cli.consumers import consumers_cmd
from exactly_once_cli.db import db_app
from exactly_once_cli.event import event_cmd, event_samples_cmd
from exactly_once_cli.init import init_cmd
from exactly_once_cli.invoke import invoke_cmd
from exactly_once_cli.layer import layer_cmd
from exactly_once_cli.locks import locks_app
from exactly_once_cli.publish import publish_cmd
from exactly_once_cli.replay import replay_app
from exactly_once_cli.send import send_cmd
from exactly_once_cli.status import status_cmd
from exactly_once_ops.local_target import local_target
from exactly_once_ops.targets import AwsTarget

app = typer.Typer(
    cls=OneLineErrorGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Start, run and operate exactly-once SQS consumers, SNS subscribers and HTTP APIs: "
    "init a service, up/down a local stack of any CDK app, send, publish, replay, invoke, locks.",
)


@app.callback()
def global_options(
    ctx: typer.Context,
    endpoint_url: Annotated[
        str | None,
        typer.Option(envvar="AWS_ENDPOINT_URL", help="AWS endpoint, e.g. the local stack."),
    ] = None,
    profile: Annotated[
        str | None, typer.Option(envvar="AWS_PROFILE", help="AWS named profile.")
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            envvar=["AWS_REGION", "AWS_DEFAULT_REGION"],
            help="AWS region (default: $AWS_REGION, else $AWS_DEFAULT_REGION, else the profile's, "
            "else us-east-1).",
        ),
    ] = None,
) -> None:
    """Options that apply to every command; they go before the command name.

    Without any (nor AWS_ENDPOINT_URL, AWS_PROFILE, AWS_ACCESS_KEY_ID or another variable that
    names a profile or credentials; a region variable alone names no account), a local stack
    that `eonce up` serves is the target, and its stack the default --stack
    (exactly_once_ops.local_target).
    """
    typed = ctx.get_parameter_source("region") is _click.core.ParameterSource.COMMANDLINE
    local = local_target(endpoint_url, profile, region if typed else None)
    ctx.obj = local or AwsTarget(endpoint_url=endpoint_url or None, profile=profile, region=region)
    if local is not None and local.local is not None:
        ctx.default_map = stack_defaults(ctx.command, local.local.stack)


DEPLOYING_COMMANDS = ("run", "chaos", "up")
"""Commands whose --stack names a stack they deploy, not one to find: no local default."""


def stack_defaults(command: object, stack: str) -> dict[str, Any]:
    """A click default map giving every command's --stack (at any depth) the value `stack`;
    the option and EONCE_STACK still win over it."""
    commands = getattr(command, "commands", None)
    if not isinstance(commands, dict):
        return {"stack": stack}
    return {
        name: stack_defaults(sub, stack)
        for name, sub in commands.items()
        if name not in DEPLOYING_COMMANDS
    }


app.command("consumers")(consumers_cmd)
app.command("send")(send_cmd)
app.command("publish")(publish_cmd)
app.add_typer(replay_app, name="replay")
app.command("event")(event_cmd)
app.command("event-samples")(event_samples_cmd)
app.command("invoke")(invoke_cmd)
app.add_typer(locks_app, name="locks")
app.command("complete")(complete_cmd)
app.add_typer(db_app, name="db")
app.command("layer")(layer_cmd)
app.command("status")(status_cmd)
app.command("init")(init_cmd)


# Commands that drive this repository's example workload and fault_injection: their modules
# stay out of the wheel. The local stack's own commands (`up`, `down`, `env`) ship with it.
CHECKOUT_COMMANDS = ("run", "chaos", "workload", "report")
LOCAL_COMMANDS = ("up", "down", "env")


def _unavailable(name: str, why: str) -> None:
    def command() -> None:
        raise CliError(f"`eonce {name}` {why}")

    app.command(
        name,
        help=f"({why})",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )(command)


if importlib.util.find_spec("local_aws") and importlib.util.find_spec("moto"):
    from exactly_once_cli.down import down_cmd
    from exactly_once_cli.up import env_cmd, up_cmd

    app.command("up")(up_cmd)
    app.command("down")(down_cmd)
    app.command("env")(env_cmd)
else:
    for _name in LOCAL_COMMANDS:
        _unavailable(
            _name, 'needs the local stack: pip install "exactly-once-sqs[local]" (and Java 17+)'
        )

if importlib.util.find_spec("fault_injection") and importlib.util.find_spec("moto"):
    from exactly_once_cli.chaos import chaos_cmd
    from exactly_once_cli.demo import report_cmd, workload_cmd
    from exactly_once_cli.run import run_cmd

    app.command("run")(run_cmd)
    app.command("chaos")(chaos_cmd)
    app.command("workload")(workload_cmd)
    app.command("report")(report_cmd)
else:
    for _name in CHECKOUT_COMMANDS:
        _unavailable(
            _name,
            "drives this repository's example app and chaos harness, which come with a checkout "
            "of the repository (git clone, then `make run`), not with the package; for your own "
            "app: `eonce up`",
        )
