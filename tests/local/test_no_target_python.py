"""A machine whose only Python is the one running the tests: no interpreter of the Lambda target's
version on PATH, none under pyenv, none named by a variable, no stand-in.

Compiling the layer's bytecode with the target's Python is right for a deployment, and only
there: the local stack deploys the layer source only (it never runs it: the workers import the
functions' code with this process's `exactly_once`), so `make run`'s deploy into moto works here.
A synth for AWS still needs the target's Python, and says so in one line through the CDK CLI
and through `eonce up`'s reason for a failed deploy, never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from typer.testing import CliRunner

from exactly_once_cdk import layer_build
from exactly_once_cdk.bytecode import STAND_IN, InterpreterNotFound, env_variable, find_interpreter
from exactly_once_cdk.layer import ExactlyOnceLayer
from exactly_once_cdk.runtime_target import PYTHON_VERSIONS, RuntimeTarget
from exactly_once_cli.app import app
from local_aws.local_deploy import ROOT, deploy, failure_reason
from local_aws.moto_server import MotoServer
from local_aws.node_tools import find_cdk
from tests.layer_bytecode import RUNNING_VERSION

# The target whose interpreter is hidden: the default, 3.13, unless that is the running one,
# which no environment can hide.
HIDDEN = "3.13" if RUNNING_VERSION != "3.13" else "3.14"


def without_targets(path: str) -> str:
    """PATH without any folder that holds a Lambda target's interpreter or pyenv's shims."""
    names = [f"python{version}" for version in PYTHON_VERSIONS]
    kept = [
        folder
        for folder in path.split(os.pathsep)
        if folder
        and "pyenv" not in folder
        and not any(os.path.exists(os.path.join(folder, name)) for name in names)
    ]
    return os.pathsep.join(kept)


@pytest.fixture
def no_target_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process and its children see no Python of any Lambda target but the running one."""
    monkeypatch.setenv("PATH", without_targets(os.environ["PATH"]))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # pyenv's default root is ~/.pyenv
    (tmp_path / "home").mkdir()
    monkeypatch.delenv(STAND_IN, raising=False)
    for version in PYTHON_VERSIONS:
        monkeypatch.delenv(env_variable(version), raising=False)
    assert shutil.which(f"python{HIDDEN}") is None
    assert shutil.which("node") is not None  # the CDK CLI still runs


@pytest.mark.usefixtures("no_target_python")
def test_the_target_python_is_hidden() -> None:
    with pytest.raises(InterpreterNotFound, match=f"no Python {HIDDEN} interpreter was found"):
        find_interpreter(HIDDEN)


@pytest.mark.usefixtures("no_target_python")
def test_the_running_interpreter_compiles_for_its_own_version() -> None:
    """A machine whose only Python is the target's own (a venv, `python3` on PATH) has what a
    build needs, whatever it is called."""
    assert find_interpreter(RUNNING_VERSION) == sys.executable


@pytest.mark.usefixtures("no_target_python")
def test_the_local_deploy_needs_no_target_python(tmp_path: Path) -> None:
    """`make run`'s deploy: the app into moto with the pinned CDK CLI, the layer source only."""
    with MotoServer() as server:
        try:
            deployment = deploy(
                server.endpoint,
                {"pythonVersion": HIDDEN},
                outdir=tmp_path / "assembly",
                work_dir=tmp_path,
            )
        except Exception:
            print(server.log_tail())
            raise
    assembly = tmp_path / "assembly"
    template = json.loads((assembly / f"{deployment.stack_name}.template.json").read_text())
    (layer,) = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::LayerVersion"
    ]
    assert layer["Properties"]["CompatibleRuntimes"] == [f"python{HIDDEN}"]
    assets = json.loads((assembly / f"{deployment.stack_name}.assets.json").read_text())
    key = layer["Properties"]["Content"]["S3Key"].removesuffix(".zip")
    staged = assembly / assets["files"][key]["source"]["path"]
    assert (staged / "python" / "exactly_once" / "sqs" / "consumer.py").is_file()
    assert not list(staged.rglob("*.pyc"))


def synth_for_aws(cwd: Path) -> subprocess.CompletedProcess[str]:
    """`make synth` (this repository's app.py through the pinned CDK CLI) in a fresh folder, so
    that no layer built earlier on this machine stands in for a build now."""
    command = f"{sys.executable} {ROOT / 'app.py'}"
    cmd = [
        str(find_cdk(ROOT)),
        "synth",
        "--quiet",
        "--no-notices",
        "--app",
        command,
        "--output",
        "cdk.out",
    ]
    cmd += ["--context", f"pythonVersion={HIDDEN}"]
    env = {**os.environ, "CDK_DISABLE_VERSION_CHECK": "1", "CDK_DISABLE_CLI_TELEMETRY": "true"}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.usefixtures("no_target_python")
def test_a_synth_for_aws_says_what_is_missing_in_one_line(tmp_path: Path) -> None:
    done = synth_for_aws(tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Traceback" not in output
    (line,) = [line for line in output.splitlines() if "InterpreterNotFound" in line]
    assert line.startswith(
        f"InterpreterNotFound: the layer's bytecode must be compiled by Python {HIDDEN}"
    )
    for hint in (f"pyenv install {HIDDEN}", env_variable(HIDDEN), "layerBytecode=false"):
        assert hint in line
    # What `eonce up` and `make run` print for a deploy that failed so: that same line.
    assert failure_reason(output) == line
    assert not list((tmp_path / "build").rglob("python"))  # refused before pip ran


@pytest.mark.usefixtures("no_target_python")
def test_any_apps_layer_follows_the_layer_bytecode_context(tmp_path: Path) -> None:
    """A user's own app (`eonce up --app`) gets the local deploy's `layerBytecode=false` too:
    the construct reads it when its `bytecode` is not given; without it, the clear error."""
    target = RuntimeTarget(HIDDEN, "arm64")
    source_only = Stack(App(context={"layerBytecode": "false"}), "Local")
    layer = ExactlyOnceLayer(source_only, "Layer", target=target, build_dir=tmp_path / "source")
    assert not layer.bytecode
    assert (tmp_path / "source" / "python" / "exactly_once" / "__init__.py").is_file()
    assert not list((tmp_path / "source").rglob("*.pyc"))
    with pytest.raises(InterpreterNotFound, match=f"Python {HIDDEN}"):
        ExactlyOnceLayer(Stack(App(), "Aws"), "Layer", target=target, build_dir=tmp_path / "aws")


@pytest.mark.usefixtures("no_target_python")
def test_eonce_layer_says_what_is_missing_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make layer` builds the layer for a deployment: the target's Python or one clear line.
    It builds for the default target, 3.13; where 3.13 is the running interpreter (which no
    environment can hide), the build is pointed at the hidden one instead, so the verdict
    is the same on every machine."""
    if RUNNING_VERSION == "3.13":
        build = layer_build.build_layer
        hidden = RuntimeTarget(python_version=HIDDEN)
        monkeypatch.setattr(
            layer_build, "build_layer", lambda out, **kw: build(out, target=hidden, **kw)
        )
    result = CliRunner().invoke(app, ["layer", "--out", str(tmp_path / "layer")])
    assert result.exit_code == 1
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: the layer's bytecode must be compiled by Python {HIDDEN}"), line
    assert env_variable(HIDDEN) in line
