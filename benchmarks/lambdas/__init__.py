"""Consumer modules written as a user would deploy them, for import-time and memory probes."""
