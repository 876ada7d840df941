"""The operator CLI: `python -m tools.cli [global options] COMMAND ...`.

Global options pick the account or emulator; each command lives in its own module and is
registered here with one line, e.g. `app.command("invoke")(invoke_cmd)` or
`app.add_typer(locks_app, name="locks")`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tools.chaos.command import chaos_cmd
from tools.cli_common import OneLineErrorGroup
from tools.event_command import event_cmd, event_samples_cmd
from tools.invoke_command import invoke_cmd
from tools.locks_command import locks_app
from tools.replay_command import replay_app
from tools.run_command import run_cmd
from tools.send_command import send_cmd
from tools.targets import AwsTarget

app = typer.Typer(
    cls=OneLineErrorGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Run and operate the exactly-once SQS consumers: run, send, replay, invoke, locks.",
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
            help="AWS region (default: the profile's, else us-east-1).",
        ),
    ] = None,
) -> None:
    """Options that apply to every command; they go before the command name."""
    ctx.obj = AwsTarget(endpoint_url=endpoint_url or None, profile=profile, region=region)


app.command("run")(run_cmd)
app.command("send")(send_cmd)
app.add_typer(replay_app, name="replay")
app.command("event")(event_cmd)
app.command("event-samples")(event_samples_cmd)
app.command("invoke")(invoke_cmd)
app.add_typer(locks_app, name="locks")
app.command("chaos")(chaos_cmd)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
