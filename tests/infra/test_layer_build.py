"""The Docker-free layer build: right layout, aarch64/3.14 wheels, cached by its inputs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from exactly_once_cdk import layer_build
from exactly_once_cdk.layer_build import PACKAGE, REQUIREMENTS, build_layer, inputs_hash


@pytest.fixture(scope="module")
def layer() -> Path:
    return build_layer()


def test_layout(layer: Path) -> None:
    site = layer / "python"
    assert (site / "exactly_once" / "schema.py").read_bytes() == (
        PACKAGE / "schema.py"
    ).read_bytes()
    assert (site / "aws_lambda_powertools").is_dir()
    pinned = REQUIREMENTS.read_text().split("aws-lambda-powertools==")[1].split()[0]
    assert (site / f"aws_lambda_powertools-{pinned}.dist-info").is_dir()
    files = [p for p in layer.rglob("*")]
    assert not [p for p in files if p.suffix == ".pyc" or p.name == "__pycache__"]
    assert not (site / "bin").exists()
    # The package as Python imports it, byte for byte, without the type checkers' marker.
    shipped = {
        p.relative_to(site / "exactly_once"): p.read_bytes()
        for p in (site / "exactly_once").rglob("*")
        if p.is_file()
    }
    source = {
        p.relative_to(PACKAGE): p.read_bytes()
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.name != "py.typed"
    }
    assert shipped == source
    assert (PACKAGE / "py.typed").is_file()
    native = [p.name for p in files if p.suffix == ".so"]
    assert all("aarch64" in name or "cpython-314" in name for name in native), native


def test_cached_build_does_not_run_pip(layer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pip(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("pip ran although nothing changed")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert build_layer() == layer


def test_hash_covers_package_files_but_not_caches(tmp_path: Path) -> None:
    package = tmp_path / "exactly_once"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    before = inputs_hash(REQUIREMENTS, package)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert inputs_hash(REQUIREMENTS, package) == before
    (package / "schema.py").write_text((package / "schema.py").read_text() + "\n# changed\n")
    assert inputs_hash(REQUIREMENTS, package) != before


def test_changed_inputs_rebuild_and_a_failed_build_keeps_the_old_layer(tmp_path: Path) -> None:
    package = tmp_path / "src" / "exactly_once"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "layer"
    build_layer(out, package=package)
    (package / "extra.py").write_text("VALUE = 1\n")
    build_layer(out, package=package)
    assert (out / "python" / "exactly_once" / "extra.py").read_text() == "VALUE = 1\n"

    broken = tmp_path / "requirements.txt"
    broken.write_text("this is not a requirement !!\n")
    with pytest.raises(RuntimeError, match="layer build failed"):
        build_layer(out, requirements=broken, package=package)
    assert (out / "python" / "exactly_once" / "extra.py").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "layer",
        "layer.inputs-sha256",
        "layer.lock",
        "requirements.txt",
        "src",
    ]


def test_pip_targets_the_functions_runtime_and_architecture() -> None:
    """The layer's wheels must match what the functions run on; the two are set apart."""
    from exactly_once_cdk.functions import ARCHITECTURE, RUNTIME

    args = dict(
        zip(layer_build.PIP_TARGET_ARGS[::2], layer_build.PIP_TARGET_ARGS[1::2], strict=False)
    )
    assert RUNTIME.name == f"python{args['--python-version']}"
    assert ARCHITECTURE.name == "arm64"
    assert args["--platform"].endswith("_aarch64")
    assert "--only-binary=:all:" in layer_build.PIP_TARGET_ARGS
