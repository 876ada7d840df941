"""Side-by-side benchmarks of this layer against Powertools' BatchProcessor + idempotency."""
