"""Start and stop moto's server (SQS, SNS, CloudFormation, Lambda metadata) on a free port.

The endpoint uses `localhost`, not 127.0.0.1: moto picks S3 virtual-host addressing from the
host name, and the CDK CLI's asset upload only works against moto with `localhost`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from local_aws.lifecycle import ChildServer
from local_aws.ports import free_port

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"  # moto's default account
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


def aws_env(endpoint_url: str) -> dict[str, str]:
    """Variables that point boto3 and the CDK CLI at a local endpoint with dummy credentials."""
    return {
        **DUMMY_CREDENTIALS,
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        # Never fall back to real profiles or instance metadata.
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


class MotoServer(ChildServer):
    """A `moto_server` process on 127.0.0.1:<free port>, reached as http://localhost:<port>."""

    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port or free_port()
        self.log_path = log_path  # None: a temporary file, gone when the server stops
        self._log: IO[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return aws_env(self.endpoint)

    def start(self, timeout_s: float = 30.0) -> MotoServer:
        # moto_server itself, with its SQS delete race closed (see local_aws/moto_entry.py).
        cmd = [
            sys.executable,
            "-m",
            "local_aws.moto_entry",
            "-H",
            "127.0.0.1",
            "-p",
            str(self.port),
        ]
        # Its request log goes to a file that `log_tail` can show when something fails.
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = self.log_path.open("wb")
        else:
            self._log = tempfile.NamedTemporaryFile(prefix="moto-", suffix=".log")  # noqa: SIM115
        root = Path(__file__).resolve().parents[1]  # so `-m local_aws.moto_entry` resolves anywhere
        self._spawn(cmd, self.port, timeout_s, stdout=self._log, stderr=subprocess.STDOUT, cwd=root)
        return self

    def log_tail(self, lines: int = 40) -> str:
        if self._log is None:
            return ""
        text = Path(str(self._log.name)).read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        self._terminate()
        if self._log is not None:
            self._log.close()
            self._log = None
