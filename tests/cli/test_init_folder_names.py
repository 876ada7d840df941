"""`eonce init NAME` refuses a name whose package folder is one the service's tools own.

The package of `eonce init build` is build/: the folder where the CDK app builds the layer
(build/layer-source), that .gitignore leaves out of version control and that `make clean`
removes, with the service's own stack in it. node_modules/ is npm's in the same way. Before,
both were written without a word.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.support import Invoke


@pytest.mark.parametrize("name", ["build", "node-modules", "node_modules"])
def test_a_name_whose_package_folder_a_tool_owns_is_refused(
    cli: Invoke, tmp_path: Path, name: str
) -> None:
    result = cli("init", name, "--directory", str(tmp_path))
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"error: invalid name {name!r}: its package folder ")
    assert list(tmp_path.iterdir()) == []
