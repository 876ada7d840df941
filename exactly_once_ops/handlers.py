"""Load a Lambda handler from its source folder, as Lambda does from the function's asset."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

LAYER_PATHS = "EONCE_LAYER_PATHS"
"""The local stack's one addition to a function's environment: its own layers' `python/` (and
`python/lib/<runtime>/site-packages`) folders (os.pathsep-separated), which `load_handler` puts
on the path as Lambda puts /opt/python.
They go after this process's packages, so the library and the wheels installed here (built for
this machine, where a layer's may be for Lambda's) win, and what only the layer has is found."""


def with_layers(environment: Mapping[str, str], layer_dirs: Iterable[Path]) -> dict[str, str]:
    """`environment` plus `LAYER_PATHS` naming `layer_dirs` (unchanged when there are none)."""
    folders = os.pathsep.join(str(folder) for folder in layer_dirs)
    return {**environment, LAYER_PATHS: folders} if folders else dict(environment)


def deployed_environment(config: Mapping[str, Any], layer_dirs: Iterable[Path]) -> dict[str, str]:
    """A deployed function's variables (from GetFunctionConfiguration) as the local stack runs
    it: with its own layers' folders (`with_layers`)."""
    variables = (config.get("Environment") or {}).get("Variables") or {}
    return with_layers(variables, layer_dirs)


def load_handler(source_dir: str, handler: str) -> Callable[[Any, Any], Any]:
    """Import `module.attribute` from the function's folder, as Lambda would from its asset."""
    module_name, attribute = handler.rsplit(".", 1)
    path = Path(source_dir) / (module_name.replace(".", "/") + ".py")
    unique = f"local_fn_{hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(unique, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load handler from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    folder = str(Path(source_dir).resolve())
    if folder not in sys.path:  # Lambda puts the asset root on the path: siblings import
        sys.path.insert(0, folder)
    for layer in filter(None, os.environ.get(LAYER_PATHS, "").split(os.pathsep)):
        if layer not in sys.path:
            sys.path.append(layer)
    spec.loader.exec_module(module)
    return getattr(module, attribute)  # type: ignore[no-any-return]
