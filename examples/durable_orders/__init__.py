"""An SQS consumer that starts one Lambda durable execution per order, and a durable workflow
whose three steps (charge, ship, email) each run once per order: AWS's documented gap between
event source mappings and durable executions, closed with a deterministic execution name and
`once` + `lock.step`. See README.md beside this file."""
