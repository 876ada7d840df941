"""`up` (deploy the local stack and keep consuming in the background) and `env` (its variables)."""

from __future__ import annotations

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
from exactly_once_ops.targets import DEFAULT_STACK, consumers_in, subscribers_in, topics_in
from local_aws.launcher import StartFailed, start_background
from local_aws.signals import Terminated, terminate_on_signals


def state_paths() -> StatePaths:
    paths = default_paths()
    if paths is None:  # only without a checkout, where these commands are not registered
        raise CliError(f"no state folder: set {STATE_DIR_ENV}")
    return paths


def export_lines(state: UpState) -> list[str]:
    return [f"export {key}={shlex.quote(value)}" for key, value in state.environment.items()]


def api_urls(outputs: dict[str, str]) -> dict[str, str]:
    """`<Api>Url` outputs (the queues' are `<Consumer>QueueUrl`)."""
    return {
        key.removesuffix("Url"): value
        for key, value in outputs.items()
        if key.endswith("Url") and not key.endswith("QueueUrl")
    }


def print_started(state: UpState, console: Console) -> None:
    """Where the stack is and how another shell reaches it."""
    consumers = ", ".join(name.lower() for name in consumers_in(state.outputs))
    console.print(f"  stack        {escape(state.stack)}: {consumers}")
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
    console.print('eonce finds it by itself in any shell; for other tools, `eval "$(eonce env)"`:')
    for line in export_lines(state):
        console.print(f"  {line}", markup=False)


def up_cmd(
    stack: Annotated[
        str, typer.Option(envvar="EONCE_STACK", help="Name of the stack to deploy.")
    ] = DEFAULT_STACK,
    workers: Annotated[int, typer.Option(min=1, max=8, help="Poller processes per function.")] = 2,
    timeout: Annotated[
        float, typer.Option(min=1, help="Seconds to wait for the stack to come up.")
    ] = 300,
    store: StoreOption = LocalStore.dynamodb,
) -> None:
    """Start the local stack in the background: moto + DynamoDB Local, deploy, poll until `down`.

    Exits 1 if a stack is already up (one per state folder, `.local/` or $EONCE_STATE_DIR).
    Ctrl-C, SIGTERM or SIGHUP before the stack is up stops everything it had started, and exits
    128 + the signal's number.
    `--store postgres` also starts a PostgreSQL server (its cluster in the state folder's
    postgres/, made anew at each `up`), the functions' idempotency store.
    """
    apply_lock_off(False)  # the background stack never runs with the lock off
    paths = state_paths()
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
                paths, stack=stack, workers=workers, timeout_s=timeout, store=store.value
            )
    except AlreadyUp as exc:
        fail(str(exc))
    except StartFailed as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt as exc:  # before the serving process was started: nothing to stop
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        fail(f"start-up interrupted by {signal.Signals(signum).name}", 128 + signum)
    if stale is not None:
        stderr().print(f"[dim]removed the state of a stack that died (pid {stale.pid})[/]")
    console.print(
        f"[green]✓[/] local stack up in {time.monotonic() - started:.1f}s "
        f"(pid {state.pid}; `eonce down` stops it)"
    )
    print_started(state, console)
    console.print(
        "Then: eonce status · eonce send --consumer orders --count 100 · "
        "eonce publish --topic sales --count 20 · eonce down"
    )


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
