"""The DynamoDB store: conditional writes on one table, fenced by a lock token and a fence
counter, with the caller's clock checked against DynamoDB's (`clock_skew`).

`store` is the `IdempotencyStore` class; `request` builds an acquire's writes, `acquisition`
sends them and reads their refusals, `fenced_writes` is the holder's conditioned write, `reads`
reads records back, `expressions` is the vocabulary they share and `table` what they need of
the store. `batched` sends a batch's acquisitions and outcomes as PartiQL (`partiql` translates
the same expressions) and falls back to the single calls for what it cannot answer."""
