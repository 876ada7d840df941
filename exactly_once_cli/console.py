"""The `eonce` console script: a clear one-line error when the `[cli]` extra is missing.

The runtime install (no extra) still installs the script; without typer and
rich it must say what to install rather than print a traceback.
"""

from __future__ import annotations

import sys

EXTRA_HINT = "pip install 'exactly-once-sqs[cli]'"


def main() -> None:
    try:
        import rich  # noqa: F401
        import typer  # noqa: F401
    except ModuleNotFoundError as exc:
        sys.stderr.write(f"eonce: the CLI needs {exc.name}, which is not installed: {EXTRA_HINT}\n")
        raise SystemExit(2) from None
    from exactly_once_cli.app import app

    app(prog_name="eonce")
