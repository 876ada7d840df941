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

REQUIREMENTS = Path(__file__).resolve().parent / "layer_requirements.txt"
POSTGRES_REQUIREMENTS = Path(__file__).resolve().parent / "layer_requirements_postgres.txt"
PACKAGE = Path(exactly_once.__file__).resolve().parent
LAYER_DIR = Path("build") / "layer"  # relative to the CDK app's directory, like cdk.out
POSTGRES_LAYER_DIR = Path("build") / "layer-postgres"

# The Lambda runtime the layer is for; keep in step with the stack's Runtime/Architecture.
# Lambda's python3.14 runs on Amazon Linux 2023 (glibc 2.34), so manylinux_2_28 wheels fit it
# too; psycopg-binary 3.3 ships no manylinux2014 (glibc 2.17) wheel for aarch64, only 2_28.
PIP_TARGET_ARGS = (
    "--platform",
    "manylinux2014_aarch64",
    "--platform",
    "manylinux_2_28_aarch64",
    "--implementation",
    "cp",
    "--python-version",
    "3.14",
    "--only-binary=:all:",
)
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
    requirements: Path = REQUIREMENTS, package: Path = PACKAGE, *, postgres: bool = False
) -> str:
    """SHA-256 over the pip arguments, the requirements and every package file (path + bytes)."""
    digest = hashlib.sha256()
    digest.update("\0".join(PIP_TARGET_ARGS).encode())
    for path in requirement_files(requirements, postgres=postgres):
        digest.update(b"\0requirements\0" + path.read_bytes())
    for path in _package_files(package):
        digest.update(b"\0" + path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _stamp(out: Path) -> Path:
    # Beside the layer, not in it: the asset hash must depend on the layer's content only.
    return out.with_name(out.name + ".inputs-sha256")


def build_layer(
    out: Path = LAYER_DIR,
    *,
    requirements: Path = REQUIREMENTS,
    package: Path = PACKAGE,
    force: bool = False,
    postgres: bool = False,
) -> Path:
    """Return `out` holding `python/<dependencies>` and `python/exactly_once`, building if stale.

    With `postgres`, the dependencies include psycopg and psycopg_pool (give it its own `out`).

    A file lock makes concurrent builders (pytest and `make synth`) wait for each other, and the
    new tree is swapped in only once complete, so a failed pip run never leaves half a layer.
    """
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    wanted = inputs_hash(requirements, package, postgres=postgres)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = _stamp(out)
        if not force and out.is_dir() and stamp.is_file() and stamp.read_text() == wanted:
            return out
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
            "--no-compile",  # .pyc for the build machine's Python would be dead weight on 3.14
            *PIP_TARGET_ARGS,
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
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
        stamp.write_text(wanted)
        return out
