"""Session fixtures of the packaging tests."""

from __future__ import annotations

import pytest

from tests.packaging.dists import Dists, build_dists


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """The wheel and sdist, built once per session for every packaging test that needs them."""
    return build_dists(tmp_path_factory.mktemp("dist"))
