"""`ExactlyOnceLayer`: the `exactly_once` package and its pinned Powertools as a Lambda layer.

Built with pip's cross-platform wheels (see `layer_build`), so synthesis needs no Docker. With
`postgres=True` (a stack on the PostgreSQL store) it also holds psycopg and psycopg_pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from exactly_once_cdk.functions import ARCHITECTURE, RUNTIME
from exactly_once_cdk.layer_build import LAYER_DIR, POSTGRES_LAYER_DIR, build_layer


class ExactlyOnceLayer(lambda_.LayerVersion):
    """A `LayerVersion` for Python 3.14 on arm64, the runtime `IdempotentConsumer` uses.

    `build_dir` is where the layer is built and cached (default `build/layer` beside cdk.out,
    `build/layer-postgres` with `postgres`); any `LayerVersionProps` keyword overrides the
    defaults. `postgres` adds the PostgreSQL driver, which only a stack on that store needs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        build_dir: Path | None = None,
        postgres: bool = False,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        **layer_props: Any,
    ) -> None:
        out = build_dir or (POSTGRES_LAYER_DIR if postgres else LAYER_DIR)
        props: dict[str, Any] = {
            "code": lambda_.Code.from_asset(str(build_layer(out, postgres=postgres))),
            "compatible_runtimes": [RUNTIME],
            "compatible_architectures": [ARCHITECTURE],
            "description": (
                "exactly_once package, pinned Powertools and psycopg"
                if postgres
                else "exactly_once package and pinned Powertools"
            ),
            "removal_policy": removal_policy,
            **layer_props,
        }
        super().__init__(scope, construct_id, **props)
