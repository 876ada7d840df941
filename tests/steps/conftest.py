"""Steps run on both stores: DynamoDB Local and a real PostgreSQL server (tests/stores'
fixtures)."""

from tests.stores.conftest import backend, make_store, store

__all__ = ["backend", "make_store", "store"]
