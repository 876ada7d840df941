"""The one error the harness raises itself."""


class BenchmarkInvalid(RuntimeError):
    """A consumer did not take the path being measured, so its numbers would mean nothing."""
