"""An app's own layers reach its functions on the local stack, as /opt/python does in Lambda.

A consumer whose handler imports a module that only its own layer holds (an asset layer with
`python/`) runs here: the assembly reader finds the layer's staged folder, the bindings carry
it (EONCE_LAYER_PATHS) and `load_handler` puts it on the path after this process's packages.
A layer published elsewhere (an ARN) has no code here and is left out.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from exactly_once_ops.handlers import LAYER_PATHS, deployed_environment, load_handler
from local_aws.cloud_assembly import read_assembly
from tests.layered_app import synthesize


def app_with_a_layer(root: Path) -> Path:
    handler = (
        "import layer_only_dep\n\ndef handle(event, context):\n    return layer_only_dep.WHO\n"
    )
    layers = {"Deps": {"python/layer_only_dep.py": "WHO = 'from the layer'\n"}}
    synthesize(root, handler, layers, root / "cdk.out")
    return root / "cdk.out"


def test_the_functions_own_layer_is_on_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assembly = app_with_a_layer(tmp_path)
    (consumer,) = read_assembly(assembly).consumers
    (layer,) = consumer.function.layer_dirs  # the asset layer; the published one has no code
    assert layer.parent.parent == assembly.resolve()
    assert (layer / "layer_only_dep.py").is_file()

    environment = deployed_environment(
        {"Environment": {"Variables": {"A": "1"}}}, consumer.function.layer_dirs
    )
    assert environment == {"A": "1", LAYER_PATHS: str(layer)}
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "layer_only_dep", raising=False)
    monkeypatch.setenv(LAYER_PATHS, environment[LAYER_PATHS])
    handler = load_handler(str(consumer.function.code_folder()), consumer.function.handler)
    assert handler({}, None) == "from the layer"
    assert sys.path[-1] == str(layer)  # after this process's own packages


def test_without_the_variable_the_layers_module_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: the same handler without its layer cannot import."""
    assembly = app_with_a_layer(tmp_path)
    (consumer,) = read_assembly(assembly).consumers
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "layer_only_dep", raising=False)
    monkeypatch.delenv(LAYER_PATHS, raising=False)
    with pytest.raises(ModuleNotFoundError, match="layer_only_dep"):
        load_handler(str(consumer.function.code_folder()), consumer.function.handler)
