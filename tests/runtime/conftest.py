"""The runtime-model tests use the stores' fixtures: every store-level test runs on both."""

from tests.stores.conftest import backend, make_store, store  # noqa: F401 (fixtures)
