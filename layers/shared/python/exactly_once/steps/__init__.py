"""Steps: recovery points inside one key, each step run once per key.

A holder's work in several steps (charge the card, create the shipment, send the email) calls
`ctx.step(name, fn)` for each. A finished step's result is written as a recovery point on the
key's record, fenced on the holder's lock, so the next holder of the key (a retry, a takeover
after a crash, a durable replay, the completer) gets the result back instead of running `fn`
again. A step's own writes commit with its point: in its PostgreSQL transaction
(`step.transaction`), or in the DynamoDB transaction that carries it (`step.write`). A call to
the outside world passes `step.idempotency_key`, the same for every holder of the key's
generation, so the provider deduplicates what a crashed holder may have sent.

Modules: `runner` (the holder's sequence of steps), `step` (what `fn` is handed), `keys` (the
step's idempotency key), `resumable` and `completer` (finishing abandoned keys), `scheduled` (the
completer as a scheduled Lambda function).
"""
