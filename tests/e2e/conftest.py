"""Session fixtures of the end-to-end tests."""

from __future__ import annotations

import pytest

from tests.packaging.dists import Dists, build_dists


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """The wheel and sdist as `make dist` builds them (the wheel from the sdist), once per
    session: what a user installs, for the tests that run the product outside the repository."""
    return build_dists(tmp_path_factory.mktemp("dist"))
