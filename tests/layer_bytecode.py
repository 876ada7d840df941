"""What the suite compiles the layer's bytecode with: the target's own interpreter where this
machine has one, else the running interpreter as the stand-in (`EONCE_BYTECODE_STAND_IN`, set in
tests/conftest.py), so that `make test` runs every synthesis on a machine whose only Python is
the one running it. Tests of the compiled layer expect the `.pyc` files of whichever compiled
it (`bytecode_tag`), and the session's header says which that was for each target.
"""

from __future__ import annotations

import os
import sys

from exactly_once_cdk.bytecode import STAND_IN, InterpreterNotFound, cache_tag, find_interpreter
from exactly_once_cdk.runtime_target import PYTHON_VERSIONS

RUNNING_VERSION = "{}.{}".format(*sys.version_info[:2])


def stand_in_environment() -> None:
    """Name the running interpreter as the stand-in, unless the caller named one."""
    os.environ.setdefault(STAND_IN, sys.executable)


def target_interpreter(version: str) -> str | None:
    """The target's own interpreter on this machine, the stand-in left out; None if none."""
    stand_in = os.environ.pop(STAND_IN, None)
    try:
        return find_interpreter(version)
    except InterpreterNotFound:
        return None
    finally:
        if stand_in is not None:
            os.environ[STAND_IN] = stand_in


def bytecode_tag(version: str) -> str:
    """The cache tag of the `.pyc` files a layer for Python `version` holds in this session:
    "cpython-313" where Python 3.13 is installed, the stand-in's otherwise."""
    own = target_interpreter(version)
    if own is not None:
        return "cpython-" + version.replace(".", "")
    return cache_tag(os.environ[STAND_IN])


def report() -> list[str]:
    """One header line per Lambda target: the interpreter its layer's bytecode comes from."""
    lines = []
    for version in PYTHON_VERSIONS:
        own = target_interpreter(version)
        where = own or f"not installed: stand-in {os.environ.get(STAND_IN)} ({RUNNING_VERSION})"
        lines.append(f"layer bytecode for Python {version}: {where}")
    return lines
