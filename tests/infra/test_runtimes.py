"""Runtimes x architectures: the settings reach the layer and every function, the asset CDK
stages holds the target's bytecode (or the suite's stand-in's where this machine lacks the
target's Python: tests/layer_bytecode.py), and a target this machine cannot compile for is a
clear error (or a source-only layer when asked for one, never in prod)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from exactly_once_cdk.bytecode import STAND_IN, InterpreterNotFound, env_variable, find_interpreter
from exactly_once_cdk.functions import FunctionOptions, python_function
from exactly_once_cdk.layer import ExactlyOnceLayer
from exactly_once_cdk.runtime_target import RuntimeTarget
from infra.settings import Settings
from tests.infra.conftest import Synth, synthesize
from tests.layer_bytecode import RUNNING_VERSION, bytecode_tag

PY312_X86: dict[str, Any] = {"pythonVersion": "3.12", "architecture": "x86_64"}
PROD: dict[str, Any] = {"stage": "prod", "account": "123456789012", "region": "eu-west-1"}


@pytest.fixture(scope="session")
def py312_x86_synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(PY312_X86, tmp_path_factory.mktemp("cdk-py312-x86"))


def layer_asset(synth: Synth) -> Path:
    """The folder CDK staged (and will zip) for the shared layer, in the synth's cdk.out."""
    props = synth.props("AWS::Lambda::LayerVersion", "SharedLayer")
    asset_hash = props["Content"]["S3Key"].removesuffix(".zip")
    manifest = synth.template_path.with_name(f"{synth.stack.stack_name}.assets.json")
    source = json.loads(manifest.read_text())["files"][asset_hash]["source"]
    assert source["packaging"] == "zip"
    folder: Path = synth.template_path.parent / str(source["path"])
    assert folder.is_dir(), folder
    return folder


@pytest.mark.parametrize(
    ("synth_name", "runtime", "architecture"),
    [("default_synth", "python3.13", "arm64"), ("py312_x86_synth", "python3.12", "x86_64")],
)
def test_layer_and_every_function_follow_the_settings(
    synth_name: str, runtime: str, architecture: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(synth_name)
    layer = synth.props("AWS::Lambda::LayerVersion", "SharedLayer")
    assert layer["CompatibleRuntimes"] == [runtime]
    assert layer["CompatibleArchitectures"] == [architecture]
    functions = synth.resources("AWS::Lambda::Function")
    assert functions
    for logical_id, function in functions.items():
        assert function["Properties"]["Runtime"] == runtime, logical_id
        assert function["Properties"]["Architectures"] == [architecture], logical_id


@pytest.mark.parametrize(
    ("synth_name", "version"), [("default_synth", "3.13"), ("py312_x86_synth", "3.12")]
)
def test_the_staged_asset_ships_the_targets_bytecode(
    synth_name: str, version: str, request: pytest.FixtureRequest
) -> None:
    """What CDK zips, not only the build folder: an asset exclude of `__pycache__` (as the
    functions' code has) would silently drop the bytecode."""
    cache_tag = bytecode_tag(version)
    asset = layer_asset(request.getfixturevalue(synth_name))
    sources = list(asset.rglob("*.py"))
    compiled = list(asset.rglob("*.pyc"))
    assert len(sources) > 100
    assert {p.name for p in compiled} == {f"{p.stem}.{cache_tag}.pyc" for p in sources}
    assert (
        asset / "python" / "exactly_once" / "sqs" / "__pycache__" / f"consumer.{cache_tag}.pyc"
    ).is_file()


@pytest.fixture
def no_python_314(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one without Python 3.14 on it, whatever it has (and no stand-in)."""
    assert RUNNING_VERSION != "3.14", "the running interpreter cannot be hidden"
    monkeypatch.delenv(env_variable("3.14"), raising=False)
    monkeypatch.delenv(STAND_IN, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))


def _stack() -> Stack:
    return Stack(App(), "Runtime")


@pytest.mark.usefixtures("no_python_314")
def test_a_target_without_its_interpreter_is_a_clear_error(tmp_path: Path) -> None:
    target = RuntimeTarget("3.14", "x86_64")
    with pytest.raises(InterpreterNotFound) as raised:  # a fresh folder: no cached build
        ExactlyOnceLayer(_stack(), "Layer", target=target, build_dir=tmp_path / "layer")
    message = str(raised.value)
    for hint in ("Python 3.14", "EONCE_PYTHON_3_14", "pyenv install 3.14", "layerBytecode=false"):
        assert hint in message


@pytest.mark.usefixtures("no_python_314")
def test_a_source_only_layer_builds_for_any_target() -> None:
    target = RuntimeTarget("3.14", "arm64")
    stack = _stack()
    layer = ExactlyOnceLayer(stack, "Layer", target=target, bytecode=False)
    python_function(
        stack,
        "Fn",
        code=lambda_.Code.from_inline("def handle(event, context): pass"),
        handler="index.handle",
        description="uses the layer",
        layers=[layer],
        environment={},
        timeout=Duration.seconds(3),
        memory_size=128,
        options=FunctionOptions(target=target),
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::Lambda::LayerVersion",
        {"CompatibleRuntimes": ["python3.14"], "CompatibleArchitectures": ["arm64"]},
    )
    template.has_resource_properties(
        "AWS::Lambda::Function", {"Runtime": "python3.14", "Architectures": ["arm64"]}
    )
    built = Path("build") / "layer-py314-arm64-source" / "python"
    assert (built / "exactly_once" / "sqs" / "consumer.py").is_file()
    assert not list(built.rglob("*.pyc"))


def test_a_function_and_a_layer_for_different_targets_are_refused() -> None:
    stack = _stack()
    layer = ExactlyOnceLayer(stack, "Layer")  # the default target: 3.13 arm64
    with pytest.raises(ValueError, match=r"python3.13 arm64.*python3.13 x86_64"):
        python_function(
            stack,
            "Fn",
            code=lambda_.Code.from_inline("def handle(event, context): pass"),
            handler="index.handle",
            description="mismatched",
            layers=[layer],
            environment={},
            timeout=Duration.seconds(3),
            memory_size=128,
            options=FunctionOptions(target=RuntimeTarget("3.13", "x86_64")),
        )


def test_an_explicit_interpreter_is_used_and_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An interpreter named for its own version is taken (by the name given, before the running
    one); named for another version, refused, not passed over for the stand-in."""
    python = str(tmp_path / "named-python")
    Path(python).symlink_to(sys.executable)
    other = next(v for v in ("3.12", "3.13") if v != RUNNING_VERSION)
    monkeypatch.setenv(env_variable(other), python)
    with pytest.raises(
        InterpreterNotFound, match=rf"{env_variable(other)}=.* not a working Python {other}"
    ):
        find_interpreter(other)
    monkeypatch.setenv(env_variable(RUNNING_VERSION), python)
    assert find_interpreter(RUNNING_VERSION) == python


class TestSettings:
    def test_defaults(self) -> None:
        empty: dict[str, Any] = {}
        settings = Settings.from_context(empty.get)
        assert settings.runtime_target == RuntimeTarget("3.13", "arm64")
        assert settings.layer_bytecode

    def test_strings_from_the_command_line(self) -> None:
        context = {**PY312_X86, "layerBytecode": "false"}
        settings = Settings.from_context(context.get)
        assert settings.runtime_target == RuntimeTarget("3.12", "x86_64")
        assert not settings.layer_bytecode

    @pytest.mark.parametrize(
        ("key", "value", "words"),
        [
            ("pythonVersion", "3.11", "expected one of 3.12, 3.13, 3.14"),
            ("architecture", "aarch64", "expected one of arm64, x86_64"),
            ("layerBytecode", "maybe", "expected true/false"),
        ],
    )
    def test_bad_values(self, key: str, value: str, words: str) -> None:
        with pytest.raises(ValueError, match=words):
            Settings.from_context({key: value}.get)

    def test_prod_refuses_a_source_only_layer(self) -> None:
        with pytest.raises(ValueError, match="a prod stage ships the compiled layer"):
            Settings.from_context({**PROD, "layerBytecode": "false"}.get)
        assert Settings.from_context(PROD.get).layer_bytecode
