"""Load a Lambda handler from its source folder, as Lambda does from the function's asset."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


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
    spec.loader.exec_module(module)
    return getattr(module, attribute)  # type: ignore[no-any-return]
