"""A deploy that does not finish in time is one line too (issue 26, defect 2).

`deploy` let the CDK CLI's `subprocess.TimeoutExpired` out: `make run` printed its traceback
(the command line of the whole `cdk deploy`, then the run's own), and `up`'s error line was
"Command '[...]' timed out after 600 seconds". Now it is a DeployError like any failed deploy.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

import pytest
from typer.testing import CliRunner

from exactly_once_cli import run as run_module
from exactly_once_cli.app import app
from local_aws import local_deploy
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.local_stack import LocalStack
from local_aws.moto_server import MotoServer
from tests.local.test_deploy_failure_reason import Stub

TIMED_OUT = "cdk deploy did not finish within 600s (stopped)"


def hung_cdk(cmd: Sequence[str], *, env: Mapping[str, str], timeout_s: float, cwd: Path) -> object:
    """`cdk deploy` still running at the timeout (its group killed by run_in_own_group)."""
    raise subprocess.TimeoutExpired(
        list(cmd), timeout_s, output=b"", stderr=b"Shop: deploying... [1/1]\nShop: creating stack"
    )


@pytest.fixture(autouse=True)
def hung(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_deploy, "ensure_assets_bucket", lambda endpoint: None)
    monkeypatch.setattr(local_deploy, "run_in_own_group", hung_cdk)


def test_a_timed_out_deploy_is_a_deploy_error(tmp_path: Path) -> None:
    with pytest.raises(local_deploy.DeployError) as raised:
        local_deploy.deploy("http://127.0.0.1:9", work_dir=tmp_path)
    assert str(raised.value) == TIMED_OUT
    assert raised.value.output.splitlines()[-1] == "Shop: creating stack"  # for up's log


def test_runs_timed_out_deploy_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    stubbed = functools.partial(
        LocalStack,
        moto=cast(MotoServer, Stub()),
        dynamodb=cast(DynamoDBLocal, Stub()),
        work_dir=tmp_path,
    )
    monkeypatch.setattr(run_module, "LocalStack", stubbed)
    monkeypatch.setenv("COLUMNS", "400")
    result = CliRunner().invoke(app, ["run"])
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [f"error: {TIMED_OUT}"]
