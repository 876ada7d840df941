"""Seed 001's case: the OrderProcessor consuming OrderCreated events from Kafka in a plain Python
service (not Lambda), writing each order once in PostgreSQL with `once`, and committing a
record's offset only after its key is complete. See README.md beside this file."""
