"""Build the shared Lambda layer without Docker, cached by a hash of its inputs.

`PythonLayerVersion` needs Docker, which this project cannot assume. pip can fetch wheels for
another platform instead (`--platform/--python-version/--only-binary`), which works as long as
every dependency ships a wheel (Powertools and its dependencies do). Repeated synths and tests
reuse the build while the requirements and package files are unchanged.

A stack on the PostgreSQL store (`postgres=True`) gets psycopg and its pool on top
(`layer_requirements_postgres.txt`), built apart in `build/layer-postgres`: a DynamoDB stack's
layer stays exactly what it was, and synthesizing both kinds in turn rebuilds neither.

The package copied in is the `exactly_once` that Python imports here: in this repository that is
`layers/shared/python/exactly_once` (editable install), elsewhere the installed wheel's copy, so
both give the same layer. `eonce layer` (or `make layer`) builds it ahead of a synth.

The build follows a `RuntimeTarget` (Python version x architecture): its wheels, its own folder
and cache key, and, unless `bytecode=False`, `.pyc` files compiled by that Python
(`exactly_once_cdk.bytecode`) so that a cold start on read-only /opt compiles nothing. The
stamp beside a build says whose `.pyc` it holds: a layer compiled by a test suite's stand-in is
reused only while the stand-in is what would compile it again (no target interpreter has
appeared, the stand-in is still asked for), never as the target's.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import exactly_once
from exactly_once_cdk.bytecode import cache_tag, compile_site, find_interpreter
from exactly_once_cdk.runtime_target import DEFAULT_TARGET, RuntimeTarget

REQUIREMENTS = Path(__file__).resolve().parent / "layer_requirements.txt"
POSTGRES_REQUIREMENTS = Path(__file__).resolve().parent / "layer_requirements_postgres.txt"
PACKAGE = Path(exactly_once.__file__).resolve().parent
LAYER_DIR = Path("build") / "layer"  # relative to the CDK app's directory, like cdk.out
POSTGRES_LAYER_DIR = Path("build") / "layer-postgres"


def layer_dir(
    target: RuntimeTarget = DEFAULT_TARGET, *, postgres: bool = False, bytecode: bool = True
) -> Path:
    """Each target (and a source-only build) has its own folder, so switching never rebuilds
    another's. The default target, compiled, keeps the folders it always had (`make layer`)."""
    base = POSTGRES_LAYER_DIR if postgres else LAYER_DIR
    suffix = ("" if target == DEFAULT_TARGET else f"-{target.slug}") + (
        "" if bytecode else "-source"
    )
    return base.with_name(base.name + suffix)


# py.typed is for type checkers on a developer's machine; the runtime never reads it.
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", "py.typed")


def _package_files(package: Path) -> Iterator[Path]:
    for path in sorted(package.rglob("*")):
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix not in (".pyc", ".pyo")
            and path.name != "py.typed"
        ):
            yield path


def requirement_files(requirements: Path = REQUIREMENTS, *, postgres: bool = False) -> list[Path]:
    """The `-r` files pip installs from: the base, plus psycopg's for the PostgreSQL store."""
    return [requirements, POSTGRES_REQUIREMENTS] if postgres else [requirements]


def inputs_hash(
    requirements: Path = REQUIREMENTS,
    package: Path = PACKAGE,
    *,
    postgres: bool = False,
    target: RuntimeTarget = DEFAULT_TARGET,
    bytecode: bool = True,
) -> str:
    """SHA-256 over the target (pip arguments, bytecode or not), the requirements and every
    package file (path + bytes)."""
    digest = hashlib.sha256()
    digest.update("\0".join(target.pip_args()).encode())
    digest.update(f"\0bytecode={bytecode}\0{target.cache_tag if bytecode else ''}".encode())
    for path in requirement_files(requirements, postgres=postgres):
        digest.update(b"\0requirements\0" + path.read_bytes())
    for path in _package_files(package):
        digest.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _stamp(out: Path) -> Path:
    # Beside the layer, not in it: the asset hash must depend on the layer's content only.
    return out.with_name(out.name + ".inputs-sha256")


def _stamped(out: Path, target: RuntimeTarget, bytecode: bool) -> tuple[str, str] | None:
    """The inputs hash and the `.pyc` cache tag ("" for none) the stamp of `out` records. A
    stamp of one line predates the tag, when only the target's own interpreter compiled."""
    stamp = _stamp(out)
    if not (out.is_dir() and stamp.is_file()):
        return None
    lines = stamp.read_text().splitlines()
    if len(lines) == 1:
        return lines[0], target.cache_tag if bytecode else ""
    return (lines[0], lines[1]) if len(lines) > 1 else None


def compiled_tag(out: Path, target: RuntimeTarget = DEFAULT_TARGET) -> str | None:
    """The cache tag of the `.pyc` files in the bytecode build at `out` for `target`
    ("cpython-313"), None when it holds none or is not built."""
    stamped = _stamped(out.resolve(), target, True)
    return stamped[1] or None if stamped else None


def build_layer(
    out: Path = LAYER_DIR,
    *,
    requirements: Path = REQUIREMENTS,
    package: Path = PACKAGE,
    force: bool = False,
    postgres: bool = False,
    target: RuntimeTarget = DEFAULT_TARGET,
    bytecode: bool = True,
) -> Path:
    """Return `out` holding `python/<dependencies>` and `python/exactly_once`, building if stale.

    With `postgres`, the dependencies include psycopg and psycopg_pool (give it its own `out`).
    `target` selects the wheels; `bytecode` adds `.pyc` files compiled by the target's Python
    (`bytecode.InterpreterNotFound`, before pip runs, when this machine has none).

    A file lock makes concurrent builders (pytest and `make synth`) wait for each other, and the
    new tree is swapped in only once complete, so a failed pip run never leaves half a layer.
    """
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    wanted = inputs_hash(requirements, package, postgres=postgres, target=target, bytecode=bytecode)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = _stamp(out)
        stamped = None if force else _stamped(out, target, bytecode)
        cached_tag = stamped[1] if stamped is not None and stamped[0] == wanted else None
        if cached_tag is not None and (not bytecode or cached_tag == target.cache_tag):
            return out
        python = find_interpreter(target.python_version) if bytecode else None
        if cached_tag and python is not None and cached_tag == cache_tag(python):
            return out  # a stand-in's build, which the stand-in would make again
        staging = out.with_name(f"{out.name}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        site = staging / "python"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            # pip would compile with the build machine's Python, whose .pyc the target ignores;
            # the target's own interpreter compiles everything below, once the tree is complete.
            "--no-compile",
            *target.pip_args(),
            "--target",
            str(site),
            *(
                arg
                for path in requirement_files(requirements, postgres=postgres)
                for arg in ("-r", str(path))
            ),
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise RuntimeError(f"layer build failed: {' '.join(cmd)}\n{result.stderr.strip()}")
        shutil.rmtree(site / "bin", ignore_errors=True)  # console scripts are useless in a layer
        shutil.copytree(package, site / package.name, ignore=_IGNORED)
        tag = ""
        if python is not None:
            try:
                compile_site(site, python)
                tag = cache_tag(python)
            except (RuntimeError, subprocess.CalledProcessError):
                shutil.rmtree(staging, ignore_errors=True)
                raise
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
        stamp.write_text(f"{wanted}\n{tag}\n")
        return out
