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

from exactly_once_cdk.functions import lambda_architecture, lambda_runtime
from exactly_once_cdk.layer_build import build_layer, layer_dir
from exactly_once_cdk.runtime_target import DEFAULT_TARGET, RuntimeTarget


class ExactlyOnceLayer(lambda_.LayerVersion):
    """A `LayerVersion` for one `RuntimeTarget` (default Python 3.13 on arm64).

    Give the functions the same `target` (`FunctionOptions(target=...)`): the wheels and the
    `.pyc` files are for that Python and CPU only. `bytecode` (default on) ships `.pyc` files
    compiled by the target's own interpreter, which the build machine must have (see
    `exactly_once_cdk.bytecode`); off, the layer is source only and every cold start compiles
    its modules. `build_dir` is where the layer is built and cached (default `build/layer`
    beside cdk.out, one folder per target, postgres and source-only build); any
    `LayerVersionProps` keyword overrides the defaults. `postgres` adds the PostgreSQL driver,
    which only a stack on that store needs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        build_dir: Path | None = None,
        postgres: bool = False,
        target: RuntimeTarget = DEFAULT_TARGET,
        bytecode: bool = True,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        **layer_props: Any,
    ) -> None:
        out = build_dir or layer_dir(target, postgres=postgres, bytecode=bytecode)
        built = build_layer(out, postgres=postgres, target=target, bytecode=bytecode)
        self.target = target
        self.bytecode = bytecode
        props: dict[str, Any] = {
            # No excludes: the default `__pycache__` exclusion of function code must not apply
            # here, the compiled files are the point.
            "code": lambda_.Code.from_asset(str(built)),
            "compatible_runtimes": [lambda_runtime(target)],
            "compatible_architectures": [lambda_architecture(target)],
            "description": (
                "exactly_once package, pinned Powertools and psycopg"
                if postgres
                else "exactly_once package and pinned Powertools"
            ),
            "removal_policy": removal_policy,
            **layer_props,
        }
        super().__init__(scope, construct_id, **props)
