"""`up` (deploy the local stack and keep consuming in the background) and `env` (its variables)."""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from exactly_once_cli.common import CliError, fail, stderr, stdout
from exactly_once_cli.self_test import apply_lock_off
from exactly_once_cli.store_target import LocalStore, StoreOption
from exactly_once_ops.local_state import (
    STATE_DIR_ENV,
    AlreadyUp,
    StatePaths,
    UpState,
    default_paths,
)
from exactly_once_ops.targets import consumers_in, subscribers_in, topics_in
from exactly_once_ops.workload import DEFAULT_TEMPLATES
from local_aws.app_source import AppNotFound, AppSource
from local_aws.launcher import StartFailed, start_background
from local_aws.local_deploy import ROOT
from local_aws.signals import Terminated, terminate_on_signals


def state_paths(app: AppSource | None = None) -> StatePaths:
    """The app's state folder: `$EONCE_STATE_DIR`, else `.local/` in the app's folder (beside
    its cdk.json, or where its `--app` file or command runs), never the working folder's when
    that is another app's (or this checkout's); without an app, the working folder's (see
    `default_state_dir`)."""
    if app is not None and not os.environ.get(STATE_DIR_ENV):
        return StatePaths(app.folder / ".local")
    paths = default_paths()
    if paths is None:
        raise CliError(
            f"no local stack state here: run in your CDK app's folder (its cdk.json), or set "
            f"{STATE_DIR_ENV}"
        )
    return paths


def resolve_app(app: str | None) -> AppSource | None:
    """The app `--app` names, else the working folder's cdk.json; None in this checkout with
    neither (its own app, as `make up` has always deployed), unless the working folder is
    below another app's cdk.json: that folder is the app's, not the checkout's."""
    try:
        return AppSource.resolve(app)
    except AppNotFound:
        if app is None and (ROOT / "cdk.json").is_file() and nearest_app() in (None, ROOT):
            return None
        raise


def nearest_app() -> Path | None:
    """The nearest folder at or above the working folder with a cdk.json."""
    here = Path.cwd().resolve()
    return next((f for f in (here, *here.parents) if (f / "cdk.json").is_file()), None)


def export_lines(state: UpState) -> list[str]:
    return [f"export {key}={shlex.quote(value)}" for key, value in state.environment.items()]


def api_urls(outputs: dict[str, str]) -> dict[str, str]:
    """`<Api>Url` outputs (the queues' are `<Consumer>QueueUrl`)."""
    return {
        key.removesuffix("Url"): value
        for key, value in outputs.items()
        if key.endswith("Url") and not key.endswith("QueueUrl")
    }


def elsewhere(paths: StatePaths) -> str:
    """`cd FOLDER && ` when the working folder's commands would not find this state folder
    (`up --app` from another folder): the other commands find the stack from the app's."""
    here = default_paths()
    if here is not None and here.root.resolve() == paths.root.resolve():
        return ""
    return f"cd {shlex.quote(_short(paths.root.resolve().parent))} && "


def print_started(state: UpState, console: Console, cd: str = "") -> None:
    """Where the stack is and how another shell reaches it (`cd`: see `elsewhere`)."""
    consumers = ", ".join(name.lower() for name in consumers_in(state.outputs))
    console.print(f"  stack        {escape(state.stack)}: {consumers}")
    if state.app:
        console.print(f"  app          {escape(state.app)}")
    console.print(f"  moto         {state.endpoint_url}  (SQS, CloudFormation, Lambda, S3, SNS)")
    console.print(f"  DynamoDB     {state.dynamodb_endpoint_url}  (DynamoDB Local)")
    if state.postgres_dsn:
        console.print(
            f"  PostgreSQL   {escape(state.postgres_dsn)}  (the idempotency store and the "
            "ledger; `eonce db`, `eonce locks` and `eonce status` find it)"
        )
    console.print(f"  poller       {state.workers} worker process(es) per consumer")
    if topics := ", ".join(name.lower() for name in topics_in(state.outputs)):
        subscribers = ", ".join(name.lower() for name in subscribers_in(state.outputs))
        here = f"; {subscribers} run here ({state.workers} process(es) each)" if subscribers else ""
        console.print(f"  topics       {topics}  (moto delivers to subscribed queues{here})")
    for name, url in api_urls(state.outputs).items():
        console.print(f"  API          {name} at {url}  (requests signed with SigV4)")
    logs = ", ".join(f"{name} {_short(Path(path))}" for name, path in state.logs.items())
    console.print(f"  logs         {logs}")
    where = f"from {cd.removeprefix('cd ').removesuffix(' && ')}" if cd else "from this folder"
    console.print(
        f"eonce finds it by itself {escape(where)} or below, in any shell; for other tools, "
        f'`eval "$({escape(cd)}eonce env)"`:'
    )
    for line in export_lines(state):
        console.print(f"  {line}", markup=False)


def up_cmd(
    app: Annotated[
        str | None,
        typer.Option(
            help="The CDK app: a folder with a cdk.json, an app .py file, or an app command as "
            "`cdk --app` takes (default: the cdk.json in this folder).",
        ),
    ] = None,
    stack: Annotated[
        str | None,
        typer.Option(
            envvar="EONCE_STACK",
            help="The stack to deploy (default: the app's one stack, by the name it gives it).",
        ),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, max=8, help="Poller processes per function.")] = 2,
    timeout: Annotated[
        float, typer.Option(min=1, help="Seconds to wait for the stack to come up.")
    ] = 300,
    store: StoreOption = LocalStore.dynamodb,
) -> None:
    """Start the local stack in the background: moto + DynamoDB Local, deploy the CDK app, run
    its consumers, subscribers and APIs until `down`.

    The app is any CDK app built with the constructs (`--app`, else this folder's cdk.json): its
    functions run here from their own code folders, with this Python's packages and the app's
    own layers.

    Exits 1 if a stack is already up (one per state folder, `.local/` or $EONCE_STATE_DIR).
    Ctrl-C, SIGTERM or SIGHUP before the stack is up stops everything it had started, and exits
    128 + the signal's number.
    `--store postgres` also starts a PostgreSQL server (its cluster in the state folder's
    postgres/, made anew at each `up`), the functions' idempotency store.
    """
    apply_lock_off(False)  # the background stack never runs with the lock off
    try:
        source = resolve_app(app)
    except AppNotFound as exc:
        fail(str(exc))
    paths = state_paths(source)
    console = stdout()
    started = time.monotonic()
    try:
        # A stop signal while it starts stops what the serving process started (which runs in
        # a session of its own, so the signal reaches only this process), and says so.
        with (
            terminate_on_signals(),
            console.status(f"Starting {store.servers}, deploying the CDK app..."),
        ):
            state, stale = start_background(
                paths,
                stack=stack,
                workers=workers,
                timeout_s=timeout,
                store=store.value,
                app=source,
            )
    except AlreadyUp as exc:
        fail(str(exc).replace("`eonce down`", f"`{elsewhere(paths)}eonce down`"))
    except StartFailed as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt as exc:  # before the serving process was started: nothing to stop
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        fail(f"start-up interrupted by {signal.Signals(signum).name}", 128 + signum)
    if stale is not None:
        stderr().print(f"[dim]removed the state of a stack that died (pid {stale.pid})[/]")
    cd = elsewhere(paths)
    console.print(
        f"[green]✓[/] local stack up in {time.monotonic() - started:.1f}s "
        f"(pid {state.pid}; `{escape(cd)}eonce down` stops it)"
    )
    print_started(state, console, cd)
    console.print(escape(next_steps(state.outputs, cd)))


def next_steps(outputs: dict[str, str], cd: str = "") -> str:
    """What to try next, with the app's own consumer and topic names (after `cd`, if any)."""
    steps = [f"{cd}eonce status"]
    if consumers := consumers_in(outputs):
        name = consumers[0].lower()
        # A consumer without a built-in body needs its shape: one with an "id" field to start.
        shape = "" if name in DEFAULT_TEMPLATES else """ --template '{"id": "{id}"}'"""
        steps.append(f"eonce send --consumer {name} --count 100{shape}")
    # An app's alarm topic (the `AlarmTopicArn` output) is for CloudWatch, not for messages.
    if topics := [name for name in topics_in(outputs) if name.lower() != "alarm"]:
        steps.append(f"eonce publish --topic {topics[0].lower()} --count 20")
    return "Then: " + " · ".join([*steps, "eonce down"])


def env_cmd() -> None:
    """Print `export` lines for the running local stack: `eval "$(eonce env)"`."""
    state = state_paths().running()
    if state is None:
        fail("no local stack is up (`eonce up` starts one)")
    for line in export_lines(state):
        typer.echo(line)


def _short(path: Path) -> str:
    """The path relative to the working directory when it is below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
