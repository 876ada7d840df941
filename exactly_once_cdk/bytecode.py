"""Compile the layer's modules to `.pyc` with the target Python's own interpreter.

A layer is mounted read-only at /opt, so a layer without `.pyc` files makes Python compile each
of its modules on every cold start and throw the result away. Bytecode is specific to a minor
version (its magic number), so the build machine's own Python cannot make it for another
target: the interpreter of the target's version is looked for here, and its absence is an
error that says how to fix it, never a silent source-only layer.

A test suite on a machine without the target's Python names a stand-in instead
(`EONCE_BYTECODE_STAND_IN`, tests/conftest.py sets it): the layer is then compiled by that
interpreter, its `.pyc` files are named by the stand-in's version (the target ignores them, as
it would a source-only layer's missing ones), and the build's cache never passes such a layer
off as the target's (`layer_build`).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

# compileall names the files as Lambda will see them, so tracebacks from a .pyc (and the
# asset's hash) do not depend on the build folder.
LAMBDA_SITE = "/opt/python"
# The interpreter to compile with when the target's own is not found: never for a deployment.
STAND_IN = "EONCE_BYTECODE_STAND_IN"


class InterpreterNotFound(RuntimeError):
    """No interpreter of the target's Python version on this machine."""


def env_variable(version: str) -> str:
    """`EONCE_PYTHON_3_13` for "3.13": the path of the interpreter to compile with."""
    return "EONCE_PYTHON_" + version.replace(".", "_")


def _reports(python: str, version: str) -> bool:
    """Whether `python` runs and is `version` (a pyenv shim on PATH may exist and refuse)."""
    try:
        done = subprocess.run(
            [python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def _candidates(version: str) -> list[str]:
    # The interpreter running this build, when it is the target's version: a machine whose
    # only Python is a 3.13 (a venv, `python3` alone on PATH) has what it needs.
    this_version = "{}.{}".format(*sys.version_info[:2]) == version
    running = [sys.executable] if this_version and sys.executable else []
    on_path = shutil.which(f"python{version}")
    pyenv_root = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    pyenv = sorted(
        glob.glob(os.path.join(pyenv_root, "versions", f"{version}.*", "bin", f"python{version}")),
        reverse=True,  # the newest patch release first (a string sort: fine below x.y.10)
    )
    return [*running, *([on_path] if on_path else []), *pyenv]


def find_interpreter(version: str) -> str:
    """The interpreter to compile for Python `version` ("3.13") with, checked by running it.

    Looked for in order: the `EONCE_PYTHON_3_13`-style variable (an explicit choice: if it is
    wrong that is an error, not a reason to look further), the running interpreter if it is
    that version, `python3.13` on PATH, then pyenv's `$PYENV_ROOT/versions/3.13.*` (default
    `~/.pyenv`); last, a test suite's `EONCE_BYTECODE_STAND_IN` (see the module's docstring).
    """
    variable = env_variable(version)
    chosen = os.environ.get(variable)
    if chosen:
        if not _reports(chosen, version):
            raise InterpreterNotFound(
                f"{variable}={chosen} is not a working Python {version} interpreter"
            )
        return chosen
    for candidate in _candidates(version):
        if _reports(candidate, version):
            return candidate
    stand_in = os.environ.get(STAND_IN)
    if stand_in:
        return stand_in
    raise InterpreterNotFound(
        f"the layer's bytecode must be compiled by Python {version} (a .pyc is specific to its "
        f"minor version) and no Python {version} interpreter was found ({variable}, "
        f"python{version} on PATH, pyenv versions/{version}.*). Install Python {version} "
        f"(e.g. `pyenv install {version}`), or point {variable} at its python, or set the "
        "context layerBytecode=false (ExactlyOnceLayer(bytecode=False)) to ship source only: "
        "every cold start then compiles the layer's modules, and prod stages refuse it"
    )


def cache_tag(python: str) -> str:
    """The `sys.implementation.cache_tag` of `python` ("cpython-313"): how its `.pyc` are named."""
    done = subprocess.run(
        [python, "-I", "-c", "import sys; print(sys.implementation.cache_tag)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def compile_site(site: Path, python: str) -> None:
    """Compile every `.py` under `site` in place with `python` (`find_interpreter`).

    `unchecked-hash`: CDK zips an asset with normalised timestamps, so a timestamp-checked
    `.pyc` would not match its source's mtime on Lambda, be judged stale and recompiled (and
    could not be written back to the read-only /opt). An unchecked-hash `.pyc` is used as is.
    """
    cmd = [
        python,
        "-I",
        "-m",
        "compileall",
        "-q",
        "-j0",
        "--invalidation-mode",
        "unchecked-hash",
        "-s",
        str(site),
        "-p",
        LAMBDA_SITE,
        str(site),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"compiling the layer failed: {' '.join(cmd)}\n{(done.stdout + done.stderr).strip()}"
        )
