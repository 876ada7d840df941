"""`ExactlyOnceLayer`: the `exactly_once` package and its pinned Powertools as a Lambda layer.

Built with pip's cross-platform wheels (see `layer_build`), so synthesis needs no Docker. With
`postgres=True` (a stack on the PostgreSQL store) it also holds psycopg and psycopg_pool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Annotations, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from exactly_once_cdk.functions import lambda_architecture, lambda_runtime
from exactly_once_cdk.layer_build import build_layer, compiled_tag, layer_dir
from exactly_once_cdk.runtime_target import DEFAULT_TARGET, RuntimeTarget


class ExactlyOnceLayer(lambda_.LayerVersion):
    """A `LayerVersion` for one `RuntimeTarget` (default Python 3.13 on arm64).

    Give the functions the same `target` (`FunctionOptions(target=...)`): the wheels and the
    `.pyc` files are for that Python and CPU only. `bytecode` ships `.pyc` files compiled by
    the target's own interpreter, which the build machine must have (see
    `exactly_once_cdk.bytecode`); off, the layer is source only and every cold start compiles
    its modules. Left unset it follows the app's `layerBytecode` context (default on): `cdk
    synth -c layerBytecode=false` works for any app, and the local stack (`eonce up`), which
    never runs the layer, deploys it source only without the target's interpreter.
    `build_dir` is where the layer is built and cached (default `build/layer` beside cdk.out,
    one folder per target, postgres and source-only build); any `LayerVersionProps` keyword
    overrides the defaults. `postgres` adds the PostgreSQL driver, which only a stack on that
    store needs.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        build_dir: Path | None = None,
        postgres: bool = False,
        target: RuntimeTarget = DEFAULT_TARGET,
        bytecode: bool | None = None,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        **layer_props: Any,
    ) -> None:
        if bytecode is None:
            bytecode = context_bytecode(scope.node.try_get_context(BYTECODE_CONTEXT))
        out = build_dir or layer_dir(target, postgres=postgres, bytecode=bytecode)
        built = build_layer(out, postgres=postgres, target=target, bytecode=bytecode)
        compiled = compiled_tag(built, target) if bytecode else None
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
        if compiled is not None and compiled != target.cache_tag:
            Annotations.of(self).add_warning_v2(
                "exactly-once:standInBytecode",
                f"the layer's .pyc files were compiled by a stand-in ({compiled}), not by "
                f"Python {target.python_version}: Lambda ignores them (EONCE_BYTECODE_STAND_IN "
                "is for test suites; never deploy this layer)",
            )


BYTECODE_CONTEXT = "layerBytecode"


def context_bytecode(value: object) -> bool:
    """The `layerBytecode` context as a flag: unset is on; `-c` gives text ("false")."""
    if value is None or isinstance(value, bool):
        return value is not False
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"context {BYTECODE_CONTEXT!r}: expected true/false, got {value!r}")
