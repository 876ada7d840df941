"""The Docker-free layer build: right layout, the target's wheels and bytecode, cached by its
inputs; and a cold import from a read-only copy that compiles nothing.

The bytecode is the target's own where this machine has its Python, else the suite's stand-in's
(tests/layer_bytecode.py): the tests expect the `.pyc` of whichever compiled it, and a stand-in
build is never reused as the target's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exactly_once_cdk.bytecode import STAND_IN, InterpreterNotFound, env_variable, find_interpreter
from exactly_once_cdk.layer_build import (
    LAYER_DIR,
    PACKAGE,
    REQUIREMENTS,
    build_layer,
    compiled_tag,
    inputs_hash,
    layer_dir,
)
from exactly_once_cdk.runtime_target import DEFAULT_TARGET, RuntimeTarget
from tests.layer_bytecode import RUNNING_VERSION, bytecode_tag

TAG = bytecode_tag(DEFAULT_TARGET.python_version)


@pytest.fixture(scope="module")
def layer() -> Path:
    return build_layer()


@pytest.fixture(scope="module")
def source_layer() -> Path:
    return build_layer(layer_dir(bytecode=False), bytecode=False)


def test_layout(layer: Path) -> None:
    site = layer / "python"
    assert (site / "exactly_once" / "stores" / "schema.py").read_bytes() == (
        PACKAGE / "stores" / "schema.py"
    ).read_bytes()
    assert (site / "aws_lambda_powertools").is_dir()
    pinned = REQUIREMENTS.read_text().split("aws-lambda-powertools==")[1].split()[0]
    assert (site / f"aws_lambda_powertools-{pinned}.dist-info").is_dir()
    files = [p for p in layer.rglob("*")]
    assert not (site / "bin").exists()
    # The package as Python imports it, byte for byte, without the type checkers' marker.
    shipped = {
        p.relative_to(site / "exactly_once"): p.read_bytes()
        for p in (site / "exactly_once").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    source = {
        p.relative_to(PACKAGE): p.read_bytes()
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.name != "py.typed"
    }
    assert shipped == source
    assert (PACKAGE / "py.typed").is_file()
    native = [p.name for p in files if p.suffix == ".so"]
    assert all("aarch64" in name or "cpython-313" in name for name in native), native


def test_every_module_has_bytecode_for_the_target_only(layer: Path, source_layer: Path) -> None:
    sources = sorted(layer.rglob("*.py"))
    assert len(sources) > 100  # Powertools and its dependencies, not only exactly_once
    expected = {p.parent / "__pycache__" / f"{p.stem}.{TAG}.pyc" for p in sources}
    assert set(layer.rglob("*.pyc")) == expected
    assert compiled_tag(layer) == TAG
    # unchecked-hash: flags word 0b01 (hash-based, not checked); PEP 552
    pyc = next(iter(expected)).read_bytes()
    assert int.from_bytes(pyc[4:8], "little") == 0b01
    assert not list(source_layer.rglob("*.pyc"))
    assert not list(source_layer.rglob("__pycache__"))
    assert sorted(p.relative_to(source_layer) for p in source_layer.rglob("*.py")) == sorted(
        p.relative_to(layer) for p in sources
    )


def _imported_from(copy: Path, env_python: str) -> list[str]:
    """The files the handler's cold import loaded code from, under the layer copy `copy`.

    `python -v` reports "code object from <file>" for every module: the `.pyc` it used, or the
    `.py` it compiled. PYTHONDONTWRITEBYTECODE stands in for /opt's read-only mount (the tests
    run as root, whom chmod does not stop), and the handler is the Orders consumer's.
    """
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{Path('functions/orders').resolve()}:{copy / 'python'}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "AWS_REGION": "us-east-1",
        "IDEMPOTENCY_TABLE": "t",
        "CONSUMER_SCOPE": "orders",
    }
    done = subprocess.run(
        [env_python, "-v", "-c", "import handler"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    marker = "# code object from "
    return [
        line[len(marker) :].strip("'")
        for line in done.stderr.splitlines()
        if line.startswith(marker) and str(copy) in line
    ]


def _read_only_copy(layer: Path, to: Path) -> Path:
    """The layer as Lambda unpacks it: source mtimes that match nothing (CDK's zip normalises
    them), and a tree that must not change."""
    shutil.copytree(layer, to)
    old = 315_532_800  # 1980-01-01, the zip format's earliest date
    for path in to.rglob("*.py"):
        os.utime(path, (old, old))
    for path in [to, *to.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return to


def test_a_cold_import_from_the_compiled_layer_compiles_nothing(
    layer: Path, source_layer: Path, tmp_path: Path
) -> None:
    python = find_interpreter(DEFAULT_TARGET.python_version)
    compiled = _read_only_copy(layer, tmp_path / "compiled")
    source = _read_only_copy(source_layer, tmp_path / "source")
    before = sorted(compiled.rglob("*"))

    from_compiled = _imported_from(compiled, python)
    from_source = _imported_from(source, python)

    # The same modules are imported either way (the consumer, exactly_once and its imports);
    # from the compiled layer every one comes from its .pyc, from the source-only layer every
    # one is compiled from its .py: the check tells the two apart.
    assert len(from_compiled) == len(from_source) > 10
    assert all(f.endswith(f".{TAG}.pyc") for f in from_compiled)
    assert all(f.endswith(".py") for f in from_source)
    assert sorted(compiled.rglob("*")) == before  # nothing written beside it either
    for path in [compiled, *compiled.rglob("*"), source, *source.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)  # let pytest clean up


def test_cached_build_does_not_run_pip(layer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nor compiles anything. (A stand-in's build asks the interpreters which would compile it
    now, so only pip and compileall are refused here.)"""
    run = subprocess.run

    def no_pip(cmd: list[str], *args: Any, **kwargs: Any) -> Any:
        if "pip" in cmd or "compileall" in cmd:
            raise AssertionError(f"{cmd} ran although nothing changed")
        return run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert build_layer() == layer


def test_hash_covers_package_files_but_not_caches(tmp_path: Path) -> None:
    package = tmp_path / "exactly_once"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    before = inputs_hash(REQUIREMENTS, package)
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert inputs_hash(REQUIREMENTS, package) == before
    (package / "stores" / "schema.py").write_text(
        (package / "stores" / "schema.py").read_text() + "\n# changed\n"
    )
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


@pytest.mark.parametrize(("architecture", "machine"), [("arm64", "aarch64"), ("x86_64", "x86_64")])
def test_pip_selects_the_targets_wheels(architecture: str, machine: str) -> None:
    args = RuntimeTarget("3.12", architecture).pip_args()
    platforms = [args[i + 1] for i, arg in enumerate(args) if arg == "--platform"]
    assert platforms == [f"manylinux2014_{machine}", f"manylinux_2_28_{machine}"]
    assert args[args.index("--python-version") + 1] == "3.12"
    assert "--only-binary=:all:" in args


def test_each_target_has_its_own_folder_and_cache_key() -> None:
    targets = [RuntimeTarget(v, a) for v in ("3.12", "3.13", "3.14") for a in ("arm64", "x86_64")]
    folders = {
        layer_dir(t, postgres=p, bytecode=b)
        for t in targets
        for p in (False, True)
        for b in (False, True)
    }
    assert len(folders) == len(targets) * 4
    assert layer_dir() == LAYER_DIR  # the default keeps `make layer`'s folder
    keys = {inputs_hash(target=t, bytecode=b) for t in targets for b in (True, False)}
    assert len(keys) == len(targets) * 2


def test_an_unknown_runtime_or_architecture_is_refused() -> None:
    with pytest.raises(ValueError, match=r"3\.12, 3\.13, 3\.14"):
        RuntimeTarget("3.11")
    with pytest.raises(ValueError, match="arm64, x86_64"):
        RuntimeTarget("3.13", "aarch64")


def test_a_stand_in_build_is_never_reused_as_the_targets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A layer compiled by the stand-in serves the sessions that ask for the stand-in; once none
    is asked for, the cached build is not the target's bytecode, so it is rebuilt, which needs
    the target's Python: on a machine without one, the error says so."""
    out = tmp_path / "layer"
    version = next(v for v in ("3.14", "3.12", "3.13") if v != RUNNING_VERSION)
    target = RuntimeTarget(version, "x86_64")  # its Python hidden below, and not the running one
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path))
    monkeypatch.delenv(env_variable(version), raising=False)
    monkeypatch.setenv(STAND_IN, sys.executable)
    build_layer(out, target=target)
    assert compiled_tag(out) == sys.implementation.cache_tag
    assert build_layer(out, target=target) == out  # reused while the stand-in is asked for
    monkeypatch.delenv(STAND_IN)
    with pytest.raises(InterpreterNotFound, match=f"no Python {version} interpreter was found"):
        build_layer(out, target=target)
