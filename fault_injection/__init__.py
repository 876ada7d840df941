"""Fault injection: drive the local stack through crashes, zombies, throttling and redelivery.

`eonce chaos` deploys the CDK app into moto and runs consumers in worker processes that kill
and pause themselves, throttle their own DynamoDB calls and drop SQS deletes, then checks from
durable state (the ledger, the DLQ, the idempotency table) that every business key took effect
exactly once and that every message is accounted for. `--store postgres` runs the layer on its
PostgreSQL store instead, the effect in the same transaction as the completion, with connection
drops and lost replies at the driver's edge (pg_faults.py) in place of DynamoDB's throttles.
`--workload steps` runs three `ctx.step` per key (steps_*.py), with crashes between and inside
the steps, and checks the books per (key, step).
"""
