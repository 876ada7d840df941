"""Which CDK app the local stack deploys: `--app`, else the working folder's cdk.json, the way
the CDK CLI itself finds an app.

`--app` takes a folder holding a cdk.json (its app, run there), a Python file (run with this
interpreter, in its folder), or a command, executable or .js file as the CDK CLI's own `--app`
takes it, run in the working folder. Not a synthesized cloud assembly: it keeps the context it
was synthesized with, and the local stack synthesizes the app with its own (`localStack=true`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

CDK_JSON = "cdk.json"


class AppNotFound(ValueError):
    """No CDK app where one was looked for; the message says where and what to give."""


@dataclass(frozen=True)
class AppSource:
    """Where the CDK CLI runs (`folder`) and what it runs (`command`: None is cdk.json's)."""

    folder: Path
    command: str | None = None

    def cli_args(self) -> list[str]:
        return [] if self.command is None else [f"--app={self.command}"]

    def describe(self) -> str:
        return self.command or str(self.folder / CDK_JSON)

    @classmethod
    def resolve(cls, app: str | None, cwd: Path | None = None) -> AppSource:
        """The app `--app` names (None: the cdk.json in `cwd`)."""
        here = (cwd or Path.cwd()).resolve()
        if app is None or not app.strip():
            if (here / CDK_JSON).is_file():
                return cls(here)
            raise AppNotFound(
                f"no {CDK_JSON} in {here}: run this in your CDK app's folder, or name the app "
                "with --app (a folder with a cdk.json, an app.py, or an app command)"
            )
        given = Path(app).expanduser()  # quoted, `--app "~/svc"` reaches here unexpanded
        path = given if given.is_absolute() else (here / app).resolve()
        if path.is_dir():
            if (path / CDK_JSON).is_file():
                return cls(path)
            if (path / "manifest.json").is_file():
                # An assembly keeps the context it was synthesized with: without localStack=true
                # its event source mappings are on, and moto would run (and drop) the messages.
                raise AppNotFound(
                    f"--app {app} is a synthesized cloud assembly, which keeps the context it "
                    "was synthesized with: name the app (its folder, .py file or command) so "
                    "that eonce synthesizes it for the local stack"
                )
            raise AppNotFound(f"no {CDK_JSON} in {path}: --app names a CDK app's folder")
        if path.suffix == ".py" and (path.exists() or not any(c.isspace() for c in app)):
            if not path.is_file():
                raise AppNotFound(f"no app file {path}")
            return cls(path.parent, f"{shlex.quote(sys.executable)} {shlex.quote(path.name)}")
        if path.is_file() and os.access(path, os.X_OK):  # as the CDK CLI runs it
            return cls(here, shlex.quote(str(path)))
        if path.is_file() and path.suffix == ".js":  # the CDK CLI runs a .js file with node
            return cls(here, f"node {shlex.quote(str(path))}")
        if path.exists():
            raise AppNotFound(
                f"--app {app}: not a CDK app's folder, a .py, .js or executable file, or a command"
            )
        if not runnable(app, here):
            raise AppNotFound(
                f"--app {app}: no such folder, file or command (a CDK app's folder with a "
                f"{CDK_JSON}, an app.py, or an app command)"
            )
        return cls(here, app)


def runnable(command: str, cwd: Path) -> bool:
    """Whether a command's program exists (on PATH, or at its path from `cwd`, where it runs),
    so that a misspelt folder is not run as a command; shell syntax the split cannot read, or
    an environment assignment before the program, is let through."""
    try:
        words = shlex.split(command)
    except ValueError:
        return True
    if not words or "=" in words[0]:  # an environment assignment before the program
        return True
    program = os.path.expanduser(words[0])  # the shell that runs it expands a leading ~
    if "/" in program:
        return shutil.which(str(cwd / program)) is not None
    return shutil.which(program) is not None
