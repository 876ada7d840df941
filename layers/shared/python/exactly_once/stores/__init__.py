"""The stores: one fenced state machine per (scope, key), kept in DynamoDB or PostgreSQL.

`protocol` is what every store does (`Store`, `open_store`); `records` and `schema` are the
shapes they return and keep; `codec`, `stored_result` and `lifetimes` are how results and
expiry are written. `dynamodb/` and `postgres/` are the two backends: `open_store` imports the
one it needs, so psycopg never loads on the DynamoDB path. Nothing here imports the lock or an
entry point.
"""
