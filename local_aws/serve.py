"""The process behind `eonce up`: deploy the local stack, poll with its consumers, deliver its
topics to their Lambda subscribers, read its Kinesis streams for their consumers, publish state.

`python -m local_aws.serve --state-dir DIR` holds the state folder's lock, deploys, starts the
poller, the SNS delivery and the stream workers (`make run`'s, one process per stream function
reading its shards as Lambda's event source mapping does), writes `up.json`, then their counts
to `up-stats.json` every second until
SIGTERM, SIGHUP or Ctrl-C; then it stops every child and removes both files. `run --keep`
serves the same way in the foreground. With `--store postgres` the stack's PostgreSQL server
keeps its cluster in the state folder (`postgres/`), and up.json records its DSN.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from exactly_once_ops.local_state import (
    AlreadyUp,
    StateLock,
    StatePaths,
    UpState,
    UpStats,
    utc_now,
)
from local_aws.api_server import ApiServer
from local_aws.app_source import AppSource
from local_aws.local_deploy import DeployError, default_app
from local_aws.local_postgres import LocalPostgres
from local_aws.local_stack import LocalStack
from local_aws.moto_server import REGION, MotoServer
from local_aws.poller import Poller, describe_bindings
from local_aws.signals import terminate_on_signals
from local_aws.sns_delivery import describe_subscribers
from local_aws.sns_worker import SnsDelivery
from local_aws.stream_bindings import describe_stream_bindings
from local_aws.stream_worker import StreamWorkers

ERROR_LINE = re.compile(r"\b\w*Error\b:")
SHELL_VARIABLES = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
"""What another shell needs to reach the stack (both region variables: boto3 reads only
AWS_DEFAULT_REGION, the CLI and the AWS CLI also AWS_REGION)."""


def up_state(stack: LocalStack, poller: Poller, logs: dict[str, Path]) -> UpState:
    """What `up.json` says about a started stack and its poller; `logs` by what they log."""
    aws = stack.aws_environment
    environment = {key: aws[key] for key in SHELL_VARIABLES}
    environment["EONCE_STACK"] = stack.stack_name  # the CLI's --stack
    return UpState(
        pid=os.getpid(),
        stack=stack.stack_name,
        region=REGION,
        endpoint_url=stack.moto.endpoint,
        dynamodb_endpoint_url=stack.dynamodb.endpoint,
        environment=environment,
        outputs=dict(stack.outputs),
        logs={name: str(path) for name, path in logs.items()},
        workers=poller.workers,
        started_at=utc_now(),
        postgres_dsn=None if stack.postgres is None else stack.postgres.dsn,
        app=describe(stack.source),
        assembly_dir=None if stack.deployment is None else str(stack.deployment.assembly_dir),
    )


def serve(
    paths: StatePaths,
    state: UpState,
    poller: Poller,
    delivery: SnsDelivery | None = None,
    interval_s: float = 1.0,
    streams: StreamWorkers | None = None,
) -> None:
    """Publish the state, then the poller's, the delivery's and the stream workers' counts
    every interval, until interrupted.

    Returns on KeyboardInterrupt (which SIGTERM/SIGHUP become under `terminate_on_signals`);
    the state files are gone by then, the caller's `with` blocks stop the children.
    """
    try:
        paths.write_stats(_stats(poller, delivery, streams))
        paths.write_state(state)
        while True:
            time.sleep(interval_s)
            paths.write_stats(_stats(poller, delivery, streams))
    except KeyboardInterrupt:
        return
    finally:
        paths.remove_state()


def long_lived_postgres(paths: StatePaths) -> LocalPostgres:
    """The PostgreSQL store of a stack that stays up: its cluster in the state folder (where
    `down` finds its server), fsync on, as a database that lives for a while should have."""
    return LocalPostgres(paths.postgres_data, fsync=True)


def start(
    paths: StatePaths,
    stack_name: str | None,
    workers: int,
    running: ExitStack,
    store: str = "dynamodb",
    app: AppSource | None = None,
) -> tuple[LocalStack, Poller, SnsDelivery, StreamWorkers, dict[str, Path]]:
    """Deploy, start polling, delivering and reading the streams; `running` stops them, in
    reverse order, however it ends. `stack_name` None deploys the app's one stack under the
    name the app gives it; `app` None is this checkout's app (else the working folder's
    cdk.json)."""
    started = time.monotonic()
    servers = (
        "moto, DynamoDB Local and PostgreSQL" if store == "postgres" else "moto and DynamoDB Local"
    )
    what = stack_name or "the app"
    _log(f"pid {os.getpid()}: starting {servers}, deploying {what} of {describe(app)}")
    logs = {
        "serve": paths.serve_log,
        "functions": paths.function_logs,
        "moto": paths.logs / "moto.log",
    }
    moto = MotoServer(log_path=logs["moto"])
    postgres = long_lived_postgres(paths) if store == "postgres" else None
    stack = running.enter_context(
        LocalStack(
            context={"stackName": stack_name} if stack_name else {},
            moto=moto,
            postgres=postgres,
            work_dir=paths.assemblies,  # `down` removes it, even after a kill
            source=app,
        )
    )
    _log(
        f"deployed in {time.monotonic() - started:.1f}s: moto at {stack.moto.endpoint}, "
        f"DynamoDB Local at {stack.dynamodb.endpoint}"
    )
    if stack.postgres is not None:
        logs["postgres"] = stack.postgres.server.log_path
        _log(f"PostgreSQL (the idempotency store) at {stack.postgres.dsn}")
    paths.function_logs.mkdir(parents=True, exist_ok=True)
    for old in paths.function_logs.glob("*.log"):
        old.unlink()
    poller = Poller(
        stack.bindings(), stack.aws_environment, workers=workers, log_dir=paths.function_logs
    )
    running.enter_context(poller)
    _log(f"poller: {workers} worker(s) per function ({describe_bindings(poller.bindings)})")
    delivery = start_delivery(stack, workers, paths.function_logs, running, _log)
    streams = start_streams(stack, paths.function_logs, running, _log)
    start_apis(stack, paths.function_logs, running)
    return stack, poller, delivery, streams, logs


def start_delivery(
    stack: LocalStack,
    workers: int,
    log_dir: Path,
    running: ExitStack,
    say: Callable[[str], None],
) -> SnsDelivery:
    """Tap each topic for its direct subscribers and deliver to their code; `running` stops it.

    The taps are subscribed here, before anything can be published to the topics."""
    bindings = stack.subscriber_bindings()
    delivery = running.enter_context(
        SnsDelivery(bindings, stack.aws_environment, workers=workers, log_dir=log_dir)
    )
    if bindings:
        say(f"SNS delivery: {workers} worker(s) per subscriber ({describe_subscribers(bindings)})")
    return delivery


def start_streams(
    stack: LocalStack, log_dir: Path, running: ExitStack, say: Callable[[str], None]
) -> StreamWorkers:
    """Read each Kinesis stream consumer's stream, and each table stream consumer's table
    stream (in DynamoDB Local), with `make run`'s stream workers (one process per stream
    function, the mapping's batch size, window, bisect, retries, record age and on-failure
    queue); `running` stops them.

    Polling starts at each shard's oldest record (TRIM_HORIZON, the constructs' starting
    position; a mapping at LATEST is read from there too), so records put before the workers
    are up are read as well. An app whose stream consumers
    cannot be read from its deployment (a function with several mappings) is still served:
    the reason is logged and its streams are not polled, as before streams were.
    """
    try:
        bindings = stack.stream_bindings(tables=True)
    except Exception as exc:
        say(f"stream poller: not started, its consumers could not be read: {one_line(exc)}")
        bindings = []
    streams = running.enter_context(StreamWorkers(bindings, stack.aws_environment, log_dir))
    if bindings:
        say(
            "stream poller: 1 worker process per stream function "
            f"({describe_stream_bindings(bindings)})"
        )
    return streams


def start_apis(
    stack: LocalStack, log_dir: Path, running: ExitStack, say: Callable[[str], None] | None = None
) -> list[ApiServer]:
    """Serve each API on a loopback port; its URL goes in the outputs as `<Api>Url`, where
    API Gateway's own output would be."""
    servers = []
    for binding in stack.api_bindings():
        log = log_dir / f"{binding.function_name}.log"
        server = running.enter_context(ApiServer(binding, stack.aws_environment, log))
        stack.outputs[f"{binding.api}Url"] = server.endpoint
        routes = ", ".join(f"{method} {path}" for method, path in binding.routes)
        (say or _log)(f"{binding.api}: {routes} at {server.endpoint}")
        servers.append(server)
    return servers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_aws.serve", description=__doc__)
    parser.add_argument("--state-dir", required=True, help="folder for up.json, stats and logs")
    parser.add_argument(
        "--stack", default=None, help="CloudFormation stack name (default: the app's own)"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="poller (and SNS delivery) processes per function"
    )
    parser.add_argument(
        "--store", choices=("dynamodb", "postgres"), default="dynamodb", help="idempotency store"
    )
    parser.add_argument("--app-dir", default=None, help="the CDK app's folder (its cdk.json)")
    parser.add_argument("--app-command", default=None, help="the CDK CLI's --app, if given")
    args = parser.parse_args(argv)
    paths = StatePaths(Path(args.state_dir).resolve())
    app = None if args.app_dir is None else AppSource(Path(args.app_dir), args.app_command)
    with terminate_on_signals(), ExitStack() as running:
        try:
            running.enter_context(StateLock(paths))
            stack, poller, delivery, streams, logs = start(
                paths, args.stack, args.workers, running, args.store, app
            )
            _log("serving until SIGTERM (`eonce down`)")
            serve(paths, up_state(stack, poller, logs), poller, delivery, streams=streams)
            _log("stopping")
        except KeyboardInterrupt:
            _log("stopped while starting")
        except AlreadyUp as exc:
            _log(f"error: {exc}")
            return 3
        except Exception as exc:
            if isinstance(exc, DeployError):  # the CLI's own output says more than our stack
                print(exc.output, flush=True)
            else:
                traceback.print_exc()
            _log(f"error: {one_line(exc)}")  # the line `up` shows
            return 1
    _log("stopped")
    return 0


def describe(app: AppSource | None) -> str:
    """The app, as `up` and `status` name it: its cdk.json, or the --app command."""
    return (app or default_app()).describe()


def one_line(exc: BaseException) -> str:
    """The exception's first line and, for a multi-line one such as a failed `cdk deploy`'s
    output, the last line naming an error (`RuntimeError: Stack name must match ...`)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    named = [line for line in lines[1:] if ERROR_LINE.search(line)]
    return f"{lines[0]} {named[-1]}" if named else lines[0]


def _stats(
    poller: Poller, delivery: SnsDelivery | None, streams: StreamWorkers | None = None
) -> UpStats:
    """The counts `status` shows: a stream consumer's (its records' outcomes, invocations,
    given-up batches) among the consumers, by its construct id."""
    counts = poller.totals_by_consumer()
    if streams is not None:
        counts = {**counts, **streams.totals_by_label()}
    subscribers = {} if delivery is None else delivery.totals_by_subscriber()
    return UpStats(
        updated_at=utc_now(),
        consumers={k: dict(v) for k, v in counts.items()},
        subscribers={k: dict(v) for k, v in subscribers.items()},
        workers={
            **poller.worker_health(),
            **({} if delivery is None else delivery.worker_health()),
            **({} if streams is None else streams.worker_health()),
        },
    )


def _log(message: str) -> None:
    stamp = datetime.now(UTC).strftime("%H:%M:%S")
    print(f"{stamp} {message}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
