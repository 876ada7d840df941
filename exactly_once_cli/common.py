"""Shared plumbing for the operator CLI: one-line errors, consoles, the AWS target in the context.

Every failure a user can cause (a bad option, a missing file, an unreachable endpoint, an AWS
error) ends as a single `error: ...` line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

from typing import Annotated, Any, NoReturn

import typer
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ProfileNotFound,
)
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text
from typer import _click  # typer 0.29 vendors click; its exception/context types live here
from typer.core import TyperGroup

from exactly_once_cli.option_hints import ARGS_META, option_hint
from exactly_once_ops.targets import (
    DEFAULT_STACK,
    AwsTarget,
    StackNotFound,
    TargetError,
    UnreachableEndpoint,
)

USAGE_EXIT = 2
FAILURE_EXIT = 1


STACK_ENV = "EONCE_STACK"
StackOption = Annotated[
    str,
    typer.Option(
        envvar=STACK_ENV,
        help=f"CloudFormation stack whose outputs name the queues and table (default: the "
        f"local stack's, when `eonce up` serves one here; else {DEFAULT_STACK}).",
    ),
]


class CliError(Exception):
    """A bad argument detected by a command; printed as one line, exit code 2."""


def name_values(pairs: list[str], option: str) -> dict[str, str]:
    """Repeatable `NAME=VALUE` options as a dict; a pair without a name or `=` is a usage error."""
    found: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise CliError(f"{option} {pair!r}: expected NAME=VALUE")
        found[name] = value
    return found


def stdout() -> Console:
    """A console on the current stdout (created per use so test runners' streams are honoured)."""
    return Console(highlight=False, soft_wrap=True)


def stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


class RateColumn(ProgressColumn):
    """Items per second (rich's own speed column assumes bytes)."""

    def __init__(self, unit: str = "msg") -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        shown = "-" if speed is None else f"{speed:,.0f}"
        return Text(f"{shown} {self.unit}/s", style="progress.data.speed")


def progress_bar(label: str, unit: str = "msg") -> Progress:
    """A progress bar on stderr with count, rate, elapsed time and ETA, for long runs."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(unit),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=stderr(),
    )


def fail(message: str, code: int = FAILURE_EXIT) -> NoReturn:
    """Print one `error:` line (markup-escaped, never wrapped) and exit."""
    stderr().print(f"[bold red]error:[/] {_escape(message)}")
    raise typer.Exit(code)


def _escape(text: str) -> str:
    """Escape rich markup and fold newlines so the message stays on one line."""
    return escape(" ".join(text.split()))


def describe(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit code for an exception a command let through."""
    if isinstance(exc, UnreachableEndpoint):  # already names where the endpoint came from
        return str(exc), FAILURE_EXIT
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError)):
        return f"{exc} (is the endpoint up? check --endpoint-url / AWS_ENDPOINT_URL)", FAILURE_EXIT
    if isinstance(exc, NoCredentialsError):
        return (
            "no AWS credentials found: pass --profile or set AWS_ACCESS_KEY_ID (for a local "
            "stack, run eonce in the folder of the app `eonce up` started)",
            FAILURE_EXIT,
        )
    if isinstance(exc, ProfileNotFound):
        return str(exc), USAGE_EXIT
    if isinstance(exc, (ClientError, BotoCoreError, StackNotFound)):
        return str(exc), FAILURE_EXIT
    if isinstance(exc, (CliError, TargetError)):
        return str(exc), USAGE_EXIT
    if isinstance(exc, _click.exceptions.NoSuchOption) and (hint := option_hint(exc)):
        return f"{exc.format_message()}{hint}", USAGE_EXIT
    if isinstance(exc, typer.TyperException):
        return f"{exc.format_message()} (see --help)", USAGE_EXIT
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}", USAGE_EXIT
    raise exc


_HANDLED = (
    BotoCoreError,
    ClientError,
    CliError,
    StackNotFound,
    TargetError,
    typer.TyperException,
    OSError,
)


class OneLineErrorGroup(TyperGroup):
    """A typer group that turns user-facing exceptions from any subcommand into one line.

    Catching in `invoke` also covers argument parsing of subcommands (including ones other
    modules register later); `parse_args` covers the group's own options.
    """

    def parse_args(self, ctx: _click.Context, args: list[str]) -> list[str]:
        ctx.meta.setdefault(ARGS_META, list(args))  # the root's: every word, for option_hint
        try:
            return super().parse_args(ctx, args)
        except _click.exceptions.NoArgsIsHelpError:
            raise
        except _click.exceptions.UsageError as exc:
            fail(*describe(exc))

    def invoke(self, ctx: _click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (_click.exceptions.NoArgsIsHelpError, BrokenPipeError):
            raise  # a closed reader is no error of the command's: the console script's to end
        except _HANDLED as exc:
            fail(*describe(exc))


def aws_target(ctx: typer.Context) -> AwsTarget:
    """The target the global options chose (the root callback stores it in `ctx.obj`); the
    first call of a run says so on stderr when it is the local stack, found by itself."""
    root = ctx.find_root()
    target = root.obj
    if not isinstance(target, AwsTarget):
        raise CliError("internal: global options were not parsed")
    if target.local is not None and not root.meta.get(LOCAL_NOTED):
        root.meta[LOCAL_NOTED] = True
        stderr().print(
            f"[dim]using the local stack {escape(target.local.stack)} (pid {target.local.pid}) "
            f"at {target.endpoint_url}[/]"
        )
    return target


LOCAL_NOTED = "eonce.local_noted"
"""Set on the root context once the local stack was named as the target: said once a run."""
