"""`layer`: build the Lambda layer ahead of a synth (cached by a hash of its inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from exactly_once_cli.common import fail, stdout

LAYER_DIR = Path("build") / "layer"


def layer_cmd(
    out: Annotated[Path, typer.Option(help="Where to build it.")] = LAYER_DIR,
    force: Annotated[
        bool, typer.Option(help="Rebuild even when the inputs are unchanged.")
    ] = False,
) -> None:
    """Build the exactly_once layer (the package plus pinned Powertools) without Docker."""
    # Loaded here: it locks with fcntl (POSIX), which the other commands must not depend on.
    from exactly_once_cdk.bytecode import InterpreterNotFound
    from exactly_once_cdk.layer_build import build_layer, inputs_hash

    try:
        path = build_layer(out, force=force)
    except InterpreterNotFound as missing:  # what to install or set, in one line
        fail(str(missing))
    stdout().print(f"layer ready: {path} ({inputs_hash()[:12]})")
