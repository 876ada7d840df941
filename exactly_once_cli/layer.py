"""`layer`: build the Lambda layer ahead of a synth (cached by a hash of its inputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from exactly_once_cdk.layer_build import LAYER_DIR, build_layer, inputs_hash
from exactly_once_cli.common import stdout


def layer_cmd(
    out: Annotated[Path, typer.Option(help="Where to build it.")] = LAYER_DIR,
    force: Annotated[
        bool, typer.Option(help="Rebuild even when the inputs are unchanged.")
    ] = False,
) -> None:
    """Build the exactly_once layer (the package plus pinned Powertools) without Docker."""
    path = build_layer(out, force=force)
    stdout().print(f"layer ready: {path} ({inputs_hash()[:12]})")
