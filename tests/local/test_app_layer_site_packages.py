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


def test_a_later_layer_wins_as_lambda_merges_layers_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda extracts a function's layers into /opt in their order, a later layer's file
    overwriting an earlier one's: of two layers with the same module, the later one's runs."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pay.py").write_text(
        "import merged_dep\n\ndef handle(event, context):\n    return merged_dep.WHO\n"
    )
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "Shop")
    consumer = IdempotentConsumer(
        stack,
        "Pay",
        code=lambda_.Code.from_asset(str(tmp_path / "src")),
        handler="pay.handle",
        table=IdempotencyTable(stack, "Records"),
        layer=lambda_.LayerVersion.from_layer_version_arn(stack, "Published", PUBLISHED),
    )
    for name in ("common", "override"):
        (tmp_path / name / "python").mkdir(parents=True)
        (tmp_path / name / "python" / "merged_dep.py").write_text(f"WHO = {name!r}\n")
        consumer.function.add_layers(
            lambda_.LayerVersion(stack, name, code=lambda_.Code.from_asset(str(tmp_path / name)))
        )
    app.synth()
    (read,) = read_assembly(tmp_path / "cdk.out").consumers
    environment = deployed_environment({}, read.function.layer_dirs)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "merged_dep", raising=False)
    monkeypatch.setenv(LAYER_PATHS, environment[LAYER_PATHS])
    handler = load_handler(str(read.function.code_folder()), read.function.handler)
    assert handler({}, None) == "override"
