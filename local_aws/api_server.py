"""The stack's HTTP APIs on loopback ports: one gateway process per deployed API function.

Each runs `local_aws.http_gateway` in a child process whose environment is the deployed
function's (read from moto) plus the local AWS endpoints, so the handler meets the same tables
as it would in Lambda, and its JSON logs go to a file like the poller's functions.

`python -m local_aws.api_server --port P --source DIR --handler H --route "POST /payments"`
is the child's own entry point.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from exactly_once_ops.handlers import deployed_environment
from local_aws import lock_off
from local_aws.lifecycle import ChildServer
from local_aws.ports import free_port
from local_aws.store_environment import apply_function_environment

if TYPE_CHECKING:
    from mypy_boto3_lambda import LambdaClient

    from exactly_once_ops.app_model import DeployedApp

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ApiBinding:
    """What a gateway needs to serve one deployed API function."""

    api: str  # the stack's API id (PaymentsApi)
    function_name: str
    source_dir: str
    handler: str
    environment: dict[str, str]
    timeout_s: int
    routes: tuple[tuple[str, str], ...]


def discover_api_bindings(lambda_client: LambdaClient, app: DeployedApp) -> list[ApiBinding]:
    """Each API's deployed function (the stack's resource) and its routes (the template's):
    environment, timeout."""
    bindings = []
    for api in app.apis:
        name = app.physical_id(api.function.logical_id)
        config = lambda_client.get_function_configuration(FunctionName=name)
        bindings.append(
            ApiBinding(
                api=api.id,
                function_name=name,
                source_dir=str(api.function.code_folder()),
                handler=config.get("Handler", api.function.handler),
                environment=deployed_environment(config, api.function.layer_dirs),
                timeout_s=int(config.get("Timeout", 29)),
                routes=api.routes,
            )
        )
    return bindings


class ApiServer(ChildServer):
    """One API's gateway in a child process; `endpoint` once started."""

    def __init__(
        self, binding: ApiBinding, aws_environment: dict[str, str], log_path: Path | None = None
    ) -> None:
        self.binding = binding
        self.aws_environment = aws_environment
        self.port = free_port()
        self.log_path = log_path
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> ApiServer:
        b = self.binding
        cmd = [sys.executable, "-m", "local_aws.api_server", "--port", str(self.port)]
        cmd += ["--source", b.source_dir, "--handler", b.handler]
        cmd += ["--function-name", b.function_name, "--timeout", str(b.timeout_s)]
        for method, path in b.routes:
            cmd += ["--route", f"{method} {path}"]
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("wb")
        env = {**os.environ, **self.aws_environment}
        apply_function_environment(env, b.environment)
        output: Any = self._log if self._log is not None else subprocess.DEVNULL
        self._spawn(cmd, self.port, timeout_s, env=env, cwd=ROOT, stdout=output, stderr=output)
        return self

    def stop(self) -> None:
        self._terminate()
        if self._log is not None:
            self._log.close()
            self._log = None


def main(argv: list[str] | None = None) -> int:
    from exactly_once_ops.handlers import load_handler
    from local_aws.http_gateway import LocalHttpApi, Route

    parser = argparse.ArgumentParser(prog="python -m local_aws.api_server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--source", required=True, help="the function's code folder")
    parser.add_argument("--handler", default="handler.handle")
    parser.add_argument("--function-name", default="local-api")
    parser.add_argument("--timeout", type=float, default=29.0)
    parser.add_argument("--route", action="append", required=True, help='"POST /payments"')
    args = parser.parse_args(argv)
    lock_off.install_if_enabled()  # the harness's self-test (EONCE_LOCK_OFF=1), never the layer's
    handler = load_handler(args.source, args.handler)
    routes = []
    for route in args.route:
        method, path = route.split(" ", 1)
        routes.append(Route(method.upper(), path, handler, args.function_name, args.timeout))
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with LocalHttpApi(routes, port=args.port), contextlib.suppress(KeyboardInterrupt):
        stopped.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
