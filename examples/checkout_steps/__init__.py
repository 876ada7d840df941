"""A checkout in three steps inside one key: charge the card through a payment provider that
deduplicates by idempotency key, create the shipment row, send the email. Each step runs once
per order, whatever crashes between them; a rerun resumes after the last finished step. Runs
on DynamoDB and on PostgreSQL. See README.md beside this file."""
