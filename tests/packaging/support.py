"""Helpers for the packaging tests: run a command the way a user's shell would."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The dev venv's bin folder (`.venv/bin`): its python, pip and console scripts.
DEV_BIN = Path(sys.executable).parent
PACKAGES = ("exactly_once", "exactly_once_cdk", "exactly_once_ops", "exactly_once_cli", "local_aws")
# Where each package's source lives in the repository.
PACKAGE_SOURCES = {
    "exactly_once": REPO / "layers" / "shared" / "python" / "exactly_once",
    "exactly_once_cdk": REPO / "exactly_once_cdk",
    "exactly_once_ops": REPO / "exactly_once_ops",
    "exactly_once_cli": REPO / "exactly_once_cli",
    "local_aws": REPO / "local_aws",
}


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without PYTHONPATH (or any PYTHON*) and without VIRTUAL_ENV."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PYTHON") and key != "VIRTUAL_ENV"
    }
    env.update(extra)
    return env


def run(
    cmd: Sequence[str | Path],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run `cmd`; with `check`, a non-zero exit fails with the command's output in the message."""
    result = subprocess.run(
        [str(part) for part in cmd],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return result


def source_files(package_dir: Path) -> Iterator[Path]:
    """Files of a package folder as a build would see them: no bytecode caches."""
    for path in sorted(package_dir.rglob("*")):
        if (
            path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix not in (".pyc", ".pyo")
        ):
            yield path


def relative_files(package_dir: Path) -> set[str]:
    return {path.relative_to(package_dir).as_posix() for path in source_files(package_dir)}


def wheel_venv(base: Path, wheel: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """A venv at `base/venv` with `wheel` installed (no dependencies, no index) and this venv's
    third-party packages visible through a plain path line, so the product runs from the wheel
    outside the repository without downloading anything: the path line adds the folder to
    sys.path but does not process its own .pth files (the editable install's), so the
    repository's folders stay out. Returns the venv's root and its site-packages."""
    root = base / "venv"
    run([DEV_BIN / "python", "-m", "venv", root], cwd=base, env=env)
    python = root / "bin" / "python"
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel], cwd=base, env=env)
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site_packages = Path(run([python, "-c", purelib], cwd=base, env=env).stdout.strip())
    (site_packages / "zz-repo-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return root, site_packages
