"""Documented examples that the test suite runs (tests/examples/)."""
