"""A layer built the other way Lambda documents, `python/lib/python3.X/site-packages/` (what
`pip install -t python/lib/python3.13/site-packages` makes), reaches its function on the local
stack too.

Lambda puts both `/opt/python/lib/<runtime>/site-packages` and `/opt/python` on the path. The
local stack added only the layer's `python/`, so a handler whose dependency was installed the
site-packages way deployed fine to AWS but failed locally with ModuleNotFoundError.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_lambda as lambda_

from exactly_once_cdk import IdempotencyTable, IdempotentConsumer
from exactly_once_ops.handlers import LAYER_PATHS, deployed_environment, load_handler
from local_aws.cloud_assembly import read_assembly

PUBLISHED = "arn:aws:lambda:us-east-1:123456789012:layer:elsewhere:3"


def app_with_a_site_packages_layer(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(
        "import site_packages_only_dep\n\n"
        "def handle(event, context):\n    return site_packages_only_dep.WHO\n"
    )
    app = App(outdir=str(root / "cdk.out"))
    stack = Stack(app, "Shop")
    consumer = IdempotentConsumer(
        stack,
        "Pay",
        code=lambda_.Code.from_asset(str(root / "src")),
        handler="pay.handle",
        table=IdempotencyTable(stack, "Records"),
        layer=lambda_.LayerVersion.from_layer_version_arn(stack, "Published", PUBLISHED),
    )
    # The folder is named after the function's runtime, as Lambda names /opt/python/lib/...
    site_packages = root / "deps" / "python" / "lib" / consumer.function.runtime.name
    (site_packages / "site-packages").mkdir(parents=True)
    (site_packages / "site-packages" / "site_packages_only_dep.py").write_text("WHO = 'site'\n")
    consumer.function.add_layers(
        lambda_.LayerVersion(stack, "Deps", code=lambda_.Code.from_asset(str(root / "deps")))
    )
    app.synth()
    return root / "cdk.out"


def test_a_layers_site_packages_folder_is_on_the_functions_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assembly = app_with_a_site_packages_layer(tmp_path)
    (consumer,) = read_assembly(assembly).consumers
    layers = consumer.function.layer_dirs
    assert [folder.name for folder in layers] == ["site-packages", "python"]  # Lambda's order
    environment = deployed_environment({}, layers)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "site_packages_only_dep", raising=False)
    monkeypatch.setenv(LAYER_PATHS, environment[LAYER_PATHS])
    handler = load_handler(str(consumer.function.code_folder()), consumer.function.handler)
    assert handler({}, None) == "site"
