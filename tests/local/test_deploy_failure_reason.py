"""A failed deploy says why, in one line: `make run` (`eonce run`) and `up` show the CDK CLI's own
error (the app's exception at synth, or the CloudFormation failure), never a traceback and
never a bare "cdk deploy failed (1)".

The CDK CLI is stood in for by what it prints (as `cdk deploy` 2.1148 prints it): a real deploy
takes minutes, and the point here is what becomes of its output. The exception is named as
Python prints it, with its module (`exactly_once_cdk.bytecode.InterpreterNotFound`): a name
that does not end in "Error" must not lose the reason either.
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

from exactly_once_cli import run as run_module
from exactly_once_cli.app import app
from exactly_once_ops.local_state import StatePaths
from local_aws import local_deploy, serve
from local_aws.dynamodb_local import DynamoDBLocal
from local_aws.launcher import last_error
from local_aws.local_stack import LocalStack
from local_aws.moto_server import MotoServer

MISSING_PYTHON = (
    "the layer's bytecode must be compiled by Python 3.13 (a .pyc is specific to its minor "
    "version) and no Python 3.13 interpreter was found"
)
SYNTH_FAILURE = f"""\
Traceback (most recent call last):
  File "/work/shop/app.py", line 6, in <module>
    app, _ = create_app()
             ^^^^^^^^^^^^
  File "/work/shop/infra/application.py", line 52, in create_app
    layer = ExactlyOnceLayer(stack, "Layer", target=settings.target)
            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/shop/exactly_once_cdk/layer_build.py", line 128, in build_layer
    python = find_interpreter(target.python_version) if bytecode else None
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/work/shop/exactly_once_cdk/bytecode.py", line 74, in find_interpreter
    raise InterpreterNotFound(
exactly_once_cdk.bytecode.InterpreterNotFound: {MISSING_PYTHON}
.venv/bin/python app.py: Subprocess exited with error 1
"""
STACK_FAILURE = """\
Shop: deploying... [1/1]
Shop: creating stack...
Shop | 3:02:11 PM | CREATE_FAILED        | AWS::SQS::Queue | OrdersQueue Resource handler \
returned message: "Invalid value for the parameter MessageRetentionPeriod."

❌  Shop failed to deploy
‣ ToolkitError: The stack named Shop failed creation, it may need to be manually deleted from \
the AWS console: ROLLBACK_COMPLETE: Invalid value for the parameter MessageRetentionPeriod.
"""


def fake_cdk(stderr: str, stdout: str = "") -> Any:
    """Stands in for `cdk deploy` that exits 1 after printing `stderr`."""

    def run(cmd: Sequence[str], *, env: Mapping[str, str], timeout_s: float, cwd: Path) -> object:
        return subprocess.CompletedProcess(list(cmd), 1, stdout, stderr)

    return run


class Stub:
    """A server stand-in: the deploy here never talks to it."""

    endpoint = "http://127.0.0.1:9"

    def start(self) -> Stub:
        return self

    def stop(self) -> None:
        return None


@pytest.fixture(autouse=True)
def no_bucket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_deploy, "ensure_assets_bucket", lambda endpoint: None)


def failed_deploy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stderr: str) -> str:
    monkeypatch.setattr(local_deploy, "run_in_own_group", fake_cdk(stderr))
    with pytest.raises(local_deploy.DeployError) as raised:
        local_deploy.deploy("http://127.0.0.1:9", work_dir=tmp_path)
    return str(raised.value)


def test_the_apps_exception_at_synth_is_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    message = failed_deploy(monkeypatch, tmp_path, SYNTH_FAILURE)
    assert message == f"cdk deploy failed (1): InterpreterNotFound: {MISSING_PYTHON}"


def test_a_cloudformation_failure_is_the_clis_own_error_lines(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    message = failed_deploy(monkeypatch, tmp_path, STACK_FAILURE)
    assert message == (
        "cdk deploy failed (1): Shop failed to deploy: ToolkitError: The stack named Shop failed "
        "creation, it may need to be manually deleted from the AWS console: ROLLBACK_COMPLETE: "
        "Invalid value for the parameter MessageRetentionPeriod."
    )


def test_the_reason_survives_a_long_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    frames = '  File "/work/shop/deep.py", line 1, in f\n    f()\n' * 60  # far more than a tail
    deep = SYNTH_FAILURE.replace(
        "Traceback (most recent call last):\n", "Traceback (most recent call last):\n" + frames
    )
    message = failed_deploy(monkeypatch, tmp_path, deep)
    assert message == f"cdk deploy failed (1): InterpreterNotFound: {MISSING_PYTHON}"


def test_ups_error_line_carries_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The serving process's `error:` line is what `up` prints (`StartFailed`, via last_error)."""
    monkeypatch.setattr(local_deploy, "run_in_own_group", fake_cdk(SYNTH_FAILURE))

    def start(*args: object, **kwargs: object) -> None:
        local_deploy.deploy("http://127.0.0.1:9", work_dir=tmp_path / "assemblies")

    monkeypatch.setattr(serve, "start", start)
    paths = StatePaths(tmp_path)
    assert serve.main(["--state-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    paths.logs.mkdir(parents=True)
    paths.serve_log.write_text(captured.out + captured.err)  # up.log holds both
    assert last_error(paths) == f"cdk deploy failed (1): InterpreterNotFound: {MISSING_PYTHON}"


def test_runs_failed_deploy_is_one_line_and_no_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(local_deploy, "run_in_own_group", fake_cdk(SYNTH_FAILURE))
    stubbed = functools.partial(
        LocalStack,
        moto=cast(MotoServer, Stub()),
        dynamodb=cast(DynamoDBLocal, Stub()),
        work_dir=tmp_path,
    )
    monkeypatch.setattr(run_module, "LocalStack", stubbed)
    monkeypatch.setenv("COLUMNS", "400")
    result = CliRunner().invoke(app, ["run"])
    assert isinstance(result.exception, SystemExit), result.exception  # not the DeployError
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: cdk deploy failed (1): InterpreterNotFound: {MISSING_PYTHON}"
    ]
