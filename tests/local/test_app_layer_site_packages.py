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

from exactly_once_ops.handlers import LAYER_PATHS, deployed_environment, load_handler
from local_aws.cloud_assembly import read_assembly
from tests.layered_app import RUNTIME, synthesize


def app_with_a_site_packages_layer(root: Path) -> Path:
    handler = (
        "import site_packages_only_dep\n\n"
        "def handle(event, context):\n    return site_packages_only_dep.WHO\n"
    )
    # The folder is named after the function's runtime, as Lambda names /opt/python/lib/...
    dep = f"python/lib/{RUNTIME}/site-packages/site_packages_only_dep.py"
    synthesize(root, handler, {"Deps": {dep: "WHO = 'site'\n"}}, root / "cdk.out")
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
    code = "import merged_dep\n\ndef handle(event, context):\n    return merged_dep.WHO\n"
    layers = {
        name: {"python/merged_dep.py": f"WHO = {name!r}\n"} for name in ("common", "override")
    }
    synthesize(tmp_path, code, layers, tmp_path / "cdk.out")
    (read,) = read_assembly(tmp_path / "cdk.out").consumers
    environment = deployed_environment({}, read.function.layer_dirs)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "merged_dep", raising=False)
    monkeypatch.setenv(LAYER_PATHS, environment[LAYER_PATHS])
    handler = load_handler(str(read.function.code_folder()), read.function.handler)
    assert handler({}, None) == "override"
