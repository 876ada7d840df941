"""The HTTP API's room: requests with an Idempotency-Key (IETF httpapi draft -07) answered once
and replayed after (`api`), with the request read (`request`), keyed per caller (`keys`,
`caller`), fingerprinted (`fingerprint`) and its response stored (`response`). Loaded on first
use: a queue consumer never imports it."""
